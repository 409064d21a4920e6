/**
 * On podman, frames skip the engine's stdio relay: the sandbox gets a socket as fd 3 (`--preserve-fds`),
 * moves it to a private descriptor and closes fd 3, so user code and its child processes start without it.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { serve } from "./_serve.ts";

const PROBE = `
import json, os, stat, subprocess, sys
def kind(fd):
    try:
        return "socket" if stat.S_ISSOCK(os.fstat(fd).st_mode) else "other"
    except OSError:
        return "closed"
fds = [int(n) for n in os.listdir("/proc/self/fd")]
count = """
import os, stat
def is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
print(sum(is_socket(int(fd)) for fd in os.listdir("/proc/self/fd")))
"""
child = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True, close_fds=False)
print(json.dumps({"fd3": kind(3), "stdin": os.readlink("/proc/self/fd/0"),
 "sockets": sum(kind(fd) == "socket" for fd in fds), "child_sockets": int(child.stdout or -1), "child_stderr": child.stderr}))
`;

Deno.test({
  name: "a podman sandbox speaks over a private socket that user code's fd 3 and child processes do not have",
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const served = await serve({ CODEMODE_RUNTIME: "podman" });
  const owner = served.transport.pid;
  try {
    const result = await served.run(PROBE, 60);
    assert.equal(result.isError, false, result.text);
    const value = JSON.parse(String(result.structured.stdout));
    assert.notEqual(value.fd3, "socket", "fd 3 was closed (and may have been reused by a pipe)");
    assert.equal(value.stdin, "/dev/null");
    assert.ok((value.sockets as number) >= 1, "the runtime's private copy of the channel");
    // The sandbox was started with the channel, and stdout is not read for frames in that mode.
    const children = execFileSync("ps", ["-o", "args=", "--ppid", String(owner)], { encoding: "utf8" });
    assert.match(children, /podman run .*--preserve-fds 1/);
    assert.equal(value.child_sockets, 0, "a child process inherits no channel, even with close_fds=False");
    // Upstream calls go over the same channel.
    const echo = await served.run("await mcp_everything.echo(message='via fd')", 60);
    assert.equal(echo.structured.value, "'Echo: via fd'");
  } finally {
    await served.close();
  }
  const left = execFileSync("podman", ["ps", "-a", "-q", "--filter", `label=codemode.owner-pid=${owner}`], {
    encoding: "utf8",
  });
  assert.equal(left.trim(), "", "no sandbox is left behind");
});
