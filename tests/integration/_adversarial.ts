/**
 * Shared pieces of the adversarial suite: what an attempt is, the Python prelude every attempt runs
 * with, and the host-side fixtures the attempts aim at (listeners that count whatever reaches them, a
 * marker file, secrets in server configs, a remote server that echoes credentials).
 * @module
 */
import assert from "node:assert/strict";
import { createSocket, type Socket } from "node:dgram";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createNetServer, type Server as NetServer } from "node:net";
import { hostname, networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import type { Answer, Served } from "./_serve.ts";
import type { TestRegistry } from "./_registry.ts";
import { describe, judge, profileRefuses } from "./_containment.ts";
import { HOST_SECRET, SERVER_SECRET } from "./_serve.ts";
import { type OAuthTestServer, startOAuthServer } from "../testdata/servers/oauth_server.ts";
import { login } from "../../core/auth/login.ts";
import { TokenStore } from "../../core/auth/token_store.ts";
import { approve } from "./_oauth.ts";
import { type OtlpReceiver, startOtlpReceiver } from "./_otlp_receiver.ts";

/** What one attempt may use. */
export interface Ctx {
  engine: string;
  /** CODEMODE_ISOLATION of the serve: "container" or "gvisor". */
  isolation: string;
  served: Served;
  fix: Fixtures;
  /** The registry the serve may add servers from (its client declines every add). */
  registry?: TestRegistry;
  /** Runs `code` after the prelude; fails unless answered within the timeout plus a minute. */
  run(code: string, timeout?: number): Promise<Answer>;
}

/** One named escape or abuse attempt and what must hold afterwards. */
export interface Attempt {
  area:
    | "network"
    | "filesystem"
    | "privileges"
    | "resources"
    | "protocol"
    | "secrets"
    | "host env"
    | "artifacts"
    | "mounts"
    | "skills"
    | "approvals"
    | "registry"
    | "jobs"
    | "tracing";
  name: string;
  /** Python, run after the prelude; prints its findings with report(...). */
  code?: string;
  timeout?: number;
  /** Holds only once codemode ships its own seccomp profile: the engines' defaults allow the call. */
  seccomp?: true;
  /** Leaves processes or descriptors behind that would distort later attempts: end the sandbox after. */
  fresh?: true;
  check?(answer: Answer, ctx: Ctx): void | Promise<void>;
  /** For attempts that take several calls; replaces code and check. */
  steps?(ctx: Ctx): Promise<void>;
}

/** Everything on the host side that sandbox code must not reach or see. */
export interface Fixtures {
  tcp4Port: number;
  tcp6Port: number;
  udp4Port: number;
  udp6Port: number;
  /** This host's addresses (IPv4 and global IPv6), plus the usual gateway and bridge addresses. */
  hostIps: string[];
  markerDir: string;
  markerFile: string;
  markerText: string;
  hostUnixSocket: string;
  /** Abstract unix socket names: our own listener's and those the host already has. */
  abstractNames: string[];
  hostName: string;
  repoRoot: string;
  /** The secret in the vault, remote and diagnostics servers' configs. */
  vaultSecret: string;
  /** Every secret sandbox code must never see. */
  secrets: string[];
  /** Where the notes server appends; every call of it needs an approval the suite's client declines. */
  notesFile: string;
  /** Server entries for fakeHome(). */
  servers: Record<string, unknown>;
  /** The OAuth-protected server behind the "oauth" entry. */
  oauth: OAuthTestServer;
  /** The collector the serve exports its traces to. */
  otlp: OtlpReceiver;
  /** Where the "trace" server records the `_meta` of each call it gets. */
  traceFile: string;
  /** Logs the "oauth" server in under `stateDir` (before serve starts); its tokens join `secrets`. */
  login(stateDir: string): Promise<void>;
  /** What reached the host listeners so far. */
  seen: { tcp: number; udp: number; unix: number };
  close(): Promise<void>;
}

/** Repository paths the configs point at. */
export interface Paths {
  repoRoot: string;
  deno: string;
  faultyServer: string;
  notesServer: string;
}

/** Starts the host-side listeners and writes the marker; close() undoes it. */
export async function fixtures(paths: Paths): Promise<Fixtures> {
  const id = crypto.randomUUID().slice(0, 8);
  const markerDir = mkdtempSync(join(tmpdir(), `codemode-adv-${id}-`));
  const markerText = `host-marker-${crypto.randomUUID()}`;
  const markerFile = join(markerDir, "host-marker.txt");
  writeFileSync(markerFile, markerText);
  const seen = { tcp: 0, udp: 0, unix: 0 };
  const closers: (() => Promise<void>)[] = [];

  const listen = async (server: NetServer, where: string | { host: string; port: number }) => {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      if (typeof where === "string") server.listen(where, resolve);
      else server.listen(where.port, where.host, resolve);
    });
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    const address = server.address();
    return typeof address === "object" && address ? address.port : 0;
  };
  const counting = (key: "tcp" | "unix") =>
    createNetServer((socket) => {
      seen[key]++;
      socket.destroy();
    });
  const tcp4Port = await listen(counting("tcp"), { host: "0.0.0.0", port: 0 });
  const tcp6Port = await listen(counting("tcp"), { host: "::", port: 0 });
  const hostUnixSocket = join(markerDir, "host.sock");
  await listen(counting("unix"), hostUnixSocket);
  const abstract = `codemode-adv-${id}`;
  await listen(counting("unix"), `\0${abstract}`);

  const udp = async (type: "udp4" | "udp6", host: string) => {
    const socket: Socket = createSocket(type);
    socket.on("message", () => seen.udp++);
    await new Promise<void>((resolve) => socket.bind(0, host, resolve));
    closers.push(() => new Promise((resolve) => socket.close(() => resolve())));
    return socket.address().port;
  };
  const udp4Port = await udp("udp4", "0.0.0.0");
  const udp6Port = await udp("udp6", "::");

  // A remote MCP server that refuses every request and quotes the credentials it got, as some APIs do.
  const echoing: HttpServer = createHttpServer((request, response) => {
    response.writeHead(401, { "content-type": "text/plain" });
    response.end(`invalid credentials ${request.headers.authorization} for ${request.url}`);
  });
  await new Promise<void>((resolve) => echoing.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => echoing.close(() => resolve())));
  const echoingPort = (echoing.address() as { port: number }).port;
  const closedPort = await freePort();

  // A remote server that needs OAuth: codemode holds its tokens, sandbox code must never see them.
  const oauth = await startOAuthServer();
  closers.push(() => oauth.close());

  // The collector the serve's spans go to: no secret may reach it either.
  const otlp = await startOtlpReceiver();
  closers.push(() => otlp.close());

  const vaultSecret = `vault-secret-${crypto.randomUUID()}`;
  const faulty = (...flags: string[]) => ["run", "-A", "--quiet", paths.faultyServer, ...flags];
  const servers = {
    vault: {
      command: paths.deno,
      args: faulty(`--api-key=${vaultSecret}`),
      env: { VAULT_TOKEN: vaultSecret },
      description: "Keeps the team's credentials",
      timeout: 5000,
    },
    remote: {
      type: "http",
      url: `http://127.0.0.1:${closedPort}/mcp?key=${vaultSecret}`,
      headers: { Authorization: `Bearer ${vaultSecret}` },
    },
    diagnostics: {
      command: paths.deno,
      args: faulty("--exit-at-start=3", "--echo-env=DIAG_TOKEN", `--token=${vaultSecret}`),
      env: { DIAG_TOKEN: vaultSecret },
    },
    "diagnostics-http": {
      type: "http",
      url: `http://127.0.0.1:${echoingPort}/mcp?key=${vaultSecret}`,
      headers: { Authorization: `Bearer ${vaultSecret}` },
    },
    "../etc": { command: paths.deno, args: faulty() },
    notes: {
      command: paths.deno,
      args: ["run", "-A", "--quiet", paths.notesServer],
      env: { NOTES_FILE: join(markerDir, "notes.txt") },
    },
    oauth: { type: "http", url: oauth.mcpUrl, description: "Needs OAuth; codemode holds its tokens" },
    trace: {
      command: paths.deno,
      args: ["run", "-A", "--quiet", join(paths.repoRoot, "tests/testdata/servers/trace_server.ts")],
      env: { META_FILE: join(markerDir, "trace-meta.jsonl"), TRACE_SECRET: vaultSecret },
    },
  };
  const secrets = [vaultSecret, SERVER_SECRET, HOST_SECRET];

  return {
    tcp4Port,
    tcp6Port,
    udp4Port,
    udp6Port,
    hostIps: hostAddresses(),
    markerDir,
    markerFile,
    markerText,
    hostUnixSocket,
    abstractNames: [abstract, ...hostAbstractNames()],
    hostName: hostname(),
    repoRoot: paths.repoRoot,
    vaultSecret,
    secrets,
    notesFile: join(markerDir, "notes.txt"),
    servers,
    oauth,
    otlp,
    traceFile: join(markerDir, "trace-meta.jsonl"),
    async login(stateDir) {
      const spec = {
        name: "oauth",
        transport: "http" as const,
        url: oauth.mcpUrl,
        source: { plugin: "test", file: "", key: "oauth" },
      };
      await login(spec, { store: new TokenStore(stateDir), authorize: (url) => approve(url.href) });
      secrets.push(...oauth.issued());
    },
    seen,
    async close() {
      await Promise.all(closers.map((close) => close()));
    },
  };
}

/** A TCP port nothing listens on (taken and released at once). */
async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function hostAddresses(): string[] {
  const found = Object.values(networkInterfaces()).flat()
    .filter((a) => a && !a.address.startsWith("fe80"))
    .map((a) => a!.address);
  return [...new Set([...found, "10.0.2.2", "10.88.0.1", "172.17.0.1", "192.168.1.1"])];
}

function hostAbstractNames(): string[] {
  try {
    return readFileSync("/proc/net/unix", "utf8").split("\n")
      .map((line) => line.trim().split(/\s+/)[7] ?? "")
      .filter((path) => path.startsWith("@"))
      .map((path) => path.slice(1))
      .slice(0, 20);
  } catch {
    return [];
  }
}

/**
 * The host processes behind the serve's live sandbox: every pid in its container's cgroup (the sandbox's
 * own processes under runc; runsc's sandbox, gVisor's kernel, under gVisor).
 */
export async function hostProcessesOf(ctx: Ctx): Promise<number[]> {
  const cli = (args: string[]) =>
    new Promise<string>((resolve) =>
      execFile(ctx.engine, args, { timeout: 15_000 }, (_error, stdout) => resolve(String(stdout)))
    );
  const ids = (await cli(["ps", "-q", "--filter", `label=codemode.owner-pid=${ctx.served.transport.pid}`]))
    .split("\n").filter(Boolean);
  const pids: number[] = [];
  for (const id of ids) {
    const pid = (await cli(["inspect", "--format", "{{.State.Pid}}", id])).trim();
    const cgroups = await readFile(`/proc/${pid}/cgroup`, "utf8").catch(() => "");
    // cgroup v1 names the pids controller; v2 has one unified line.
    const v1 = /^\d+:pids:(.*)$/m.exec(cgroups)?.[1];
    const v2 = /^0::(.*)$/m.exec(cgroups)?.[1];
    const procs = v1 !== undefined
      ? `/sys/fs/cgroup/pids${v1}/cgroup.procs`
      : `/sys/fs/cgroup${v2}/cgroup.procs`;
    const listed = await readFile(procs, "utf8").catch(() => "");
    pids.push(...listed.split("\n").filter(Boolean).map(Number));
  }
  return pids;
}

/** Python for host-API attempts: `await try_(name, coro)` sets `results[name]` to "allowed" when `coro`
 * returned, else to the exception's type; `rpc` is the run's channel to the host. */
export const TRY = `
import sys
from codemode_runtime import context as _context
from mcp import runtime
rpc = _context.current().rpc
results = {}
async def try_(name, coro):
    try:
        await coro
        results[name] = "allowed"
    except Exception as e:
        results[name] = type(e).__name__
    # Each outcome as it comes, on stderr: an attempt that runs out of time shows how far it got.
    print(f"tried {name}: {results[name]}", file=sys.stderr, flush=True)
`;

/** The findings an attempt printed with report(...). */
export function facts(answer: Answer): Record<string, unknown> {
  // A large stdout comes once, as the text (structuredContent says `stdout_in_text`).
  const stdout = String(answer.structured.stdout_in_text ? answer.text : answer.structured.stdout ?? "");
  const line = stdout.split("\n").reverse().find((l) => l.startsWith("FACTS "));
  assert.ok(line, `the attempt reported nothing: ${answer.text.slice(0, 1500)}`);
  return JSON.parse(line.slice(6));
}

/** Fails when any value of `results` is "allowed" (the prelude's attempt() outcome). */
export function noneAllowed(results: unknown, what: string): void {
  const allowed = Object.entries(results as Record<string, string>).filter(([, v]) => v === "allowed");
  assert.deepEqual(allowed, [], `${what} must all fail`);
}

/**
 * Fails unless every syscall attempt in `results` was contained, and logs which layer contained each
 * (see _containment.ts): each key names its syscall first (`"unshare user"`), or `syscall` names it for
 * all. The filter is the layer when codemode's profile refuses that syscall outright and the outcome is
 * one of its answers; otherwise the kernel's own answer decides, so a kernel without the feature passes.
 */
export function refused(results: unknown, what: string, syscall?: string): void {
  const verdicts = Object.fromEntries(
    Object.entries(results as Record<string, string>).map(([key, outcome]) => {
      const name = syscall ?? key.split(/[ (]/)[0];
      const filtered = profileRefuses(name) === true && FILTER_ANSWERS.has(outcome);
      return [key, judge(outcome, filtered)];
    }),
  );
  console.log(`${what}:\n${describe(verdicts)}`);
  const through = Object.entries(verdicts).filter(([, v]) => !v.contained);
  assert.deepEqual(through, [], `${what}: every call must be contained`);
}

/** What codemode's profile answers a call it refuses (its errnoRet values, or SIGSYS for a foreign ABI). */
const FILTER_ANSWERS = new Set(["EPERM", "ENOSYS", "EAFNOSUPPORT", "EPROTONOSUPPORT", "killed:SIGSYS"]);

/** Python that runs before every attempt: syscall and attempt helpers, the fixtures, report(). */
export function prelude(fix: Fixtures): string {
  // Hex, so that no secret appears literally in the source (tracebacks quote source lines).
  const data = new TextEncoder().encode(
    JSON.stringify({
      ...fix,
      servers: undefined,
      seen: undefined,
      close: undefined,
      oauth: undefined,
      otlp: undefined,
      login: undefined,
    }),
  );
  const hex = Array.from(data, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${PRELUDE}\nFIX = json.loads(bytes.fromhex("${hex}"))\nSECRETS = FIX["secrets"]\n`;
}

const PRELUDE = `
import ctypes, errno, json, os, platform, signal, socket, struct, subprocess, sys
_libc = ctypes.CDLL(None, use_errno=True)
_NR = {
    "x86_64": dict(ptrace=101, setuid=105, syslog=103, init_module=175, delete_module=176,
        finit_module=313, mount=165, umount2=166, swapon=167, reboot=169, sethostname=170, chroot=161, pivot_root=155,
        acct=163, settimeofday=164, kexec_load=246, add_key=248, keyctl=250, unshare=272, setns=308,
        open_by_handle_at=304, perf_event_open=298, bpf=321, userfaultfd=323, io_uring_setup=425,
        clock_settime=227, mknodat=259, iopl=172, ioperm=173),
    "aarch64": dict(ptrace=117, setuid=146, syslog=116, init_module=105, delete_module=106,
        finit_module=273, mount=40, umount2=39, swapon=224, reboot=142, sethostname=161, chroot=51, pivot_root=41,
        acct=89, settimeofday=170, kexec_load=104, add_key=217, keyctl=219, unshare=97, setns=268,
        open_by_handle_at=265, perf_event_open=241, bpf=280, userfaultfd=282, io_uring_setup=425,
        clock_settime=112, mknodat=33),
}[platform.machine()]

def _arg(a):
    return ctypes.c_long(a) if isinstance(a, int) else a

def syscall(name, *args):
    """'ok' when the raw syscall succeeded, else its errno name."""
    r = _libc.syscall(ctypes.c_long(_NR[name]), *map(_arg, args))
    return "ok" if r != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def attempt(fn):
    """'allowed' when fn() did not raise, else the errno name or exception type."""
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
    except BaseException as e:
        return type(e).__name__

def root_of(path):
    """'same' when path lists like the sandbox's own root, 'different' when not, else the errno name."""
    try:
        return "same" if sorted(os.listdir(path)) == sorted(os.listdir("/")) else "different"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def in_child(fn, seconds=10):
    """fn() in a forked, single-threaded child (namespaces need one); its JSON-able result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            signal.alarm(seconds)
            out = fn()
        except BaseException as e:
            out = type(e).__name__
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data or b'"no answer"')

def leaks(value):
    """Whether any secret occurs in value (anything JSON-able or text)."""
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return any(s in text for s in SECRETS)

def redact(value):
    """value as text with every secret replaced by <SECRET>, for reporting a leak without repeating it."""
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    for s in SECRETS:
        text = text.replace(s, "<SECRET>")
    return text

def report(**facts):
    print("FACTS " + json.dumps(facts, default=repr), flush=True)
`;
