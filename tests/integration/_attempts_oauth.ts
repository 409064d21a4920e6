/**
 * Attempts on the OAuth tokens codemode holds for a remote server ("oauth", logged in before serve
 * starts): sandbox code uses the server, then looks for its tokens everywhere it can look. The fixture
 * adds the tokens to SECRETS, so `leaks()` in the prelude knows them.
 * @module
 */
import assert from "node:assert/strict";
import { type Attempt, facts } from "./_adversarial.ts";

/** OAuth tokens: usable through the proxy, readable nowhere. */
export const oauthTokens: Attempt[] = [
  {
    area: "secrets",
    name: "an OAuth server's tokens are in no environment, file, listing, doc, search hit, result or error",
    timeout: 90,
    code: `
from mcp import runtime
seen = {}
async def grab(key, fn):
    try:
        value = fn()
        if hasattr(value, "__await__"):
            value = await value
        seen[key] = value
    except Exception as e:
        seen[key] = type(e).__name__ + ": " + str(e)
await grab("whoami", mcp_oauth.whoami)
await grab("list_servers", runtime.list_servers)
await grab("describe", lambda: runtime.describe_server("oauth"))
await grab("discovered", lambda: runtime.discovered_servers(detailed=True))
await grab("capabilities", runtime.capability_summary)
await grab("docs", lambda: runtime.query_tool_docs("oauth", detail="full"))
for q in ("oauth", "token", "Bearer", "authorization", "credentials", SECRETS[-1][:12]):
    await grab("search " + q, lambda: runtime.search_tool_docs(q, limit=50))
await grab("error quoting the credentials", mcp_oauth.auth_error)
await grab("raw error result", lambda: runtime.call_tool("oauth", "auth_error", {}, raw=True))
await grab("tool error", lambda: mcp_oauth.fail(message="x"))
await grab("unknown tool", lambda: mcp_oauth.no_such_tool())
await grab("bad arguments", lambda: mcp_oauth.echo(wrong=1))
await grab("help", lambda: mcp_oauth.echo.__doc__)
await grab("environ", lambda: dict(os.environ))
def proc(kind):
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                out[p] = open(f"/proc/{p}/{kind}", "rb").read().decode(errors="replace")
            except OSError:
                pass
    return out
await grab("proc environ", lambda: proc("environ"))
await grab("proc cmdline", lambda: proc("cmdline"))
# The image's read-only /usr was built before any login (hundreds of MB with the data-science
# libraries): it cannot hold a token, and reading it all takes minutes on a busy machine.
import stat
frozen = ("/usr",) if os.statvfs("/usr").f_flag & os.ST_RDONLY else ()
def files():
    hits, read = [], 0
    for root, dirs, names in os.walk("/"):
        if root.startswith(("/proc", "/sys", "/dev")) or root in frozen:
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
                # Regular files only: earlier attempts leave FIFOs, whose open() would wait for a writer.
                if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
                    continue
                data = open(path, "rb").read().decode(errors="replace")
            except OSError:
                continue
            read += 1
            if leaks(data):
                hits.append(path)
    return {"hits": hits, "read": read}
seen["files"] = files()
report(leaks={k: redact(v)[:600] for k, v in seen.items() if k != "files" and leaks(v)},
       file_hits=seen["files"]["hits"], files_read=seen["files"]["read"], skipped=frozen,
       whoami=seen["whoami"],
       quoted=redact(seen["error quoting the credentials"])[:300])`,
    check(answer) {
      const f = facts(answer);
      assert.deepEqual(f.leaks, {}, "a token is visible to sandbox code");
      assert.deepEqual(f.file_hits, [], "a token is in a file sandbox code can read");
      assert.ok(Number(f.files_read) > 100, `only ${f.files_read} files were read`);
      assert.equal(typeof f.whoami, "object", `the OAuth server was not usable: ${JSON.stringify(f.whoami)}`);
      assert.match(String(f.quoted), /ToolError: rejected credentials: Bearer \[redacted\]/);
    },
  },
];
