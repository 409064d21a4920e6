import assert from "node:assert/strict";
import { OutputBuffer } from "../../core/sandbox/output_buffer.ts";
import { CANCELLED, type RunRecord, runResult } from "../../core/sandbox/run_result.ts";

function record(overrides: Partial<RunRecord> = {}): RunRecord {
  const stdout = new OutputBuffer(1024);
  stdout.append("partial\n");
  return {
    stdout,
    stderr: new OutputBuffer(1024),
    duration: 1.5,
    timeoutSeconds: 30,
    cancelled: false,
    ...overrides,
  };
}

Deno.test("runResult() passes the sandbox's done frame through with the captured output", () => {
  const result = runResult({ type: "done", id: "r", status: "ok", value: "42" }, record());
  assert.deepEqual(result, {
    status: "ok",
    stdout: "partial\n",
    stderr: "",
    duration: 1.5,
    value: "42",
    notes: [],
  });
});

Deno.test("runResult() reports an interrupted cancelled run as cancelled, and the session as kept", () => {
  const done = {
    type: "done" as const,
    id: "r",
    status: "timeout" as const,
    error: "Timed out after 30s: ...",
  };
  const result = runResult(done, record({ cancelled: true }));
  assert.equal(result.status, "cancelled");
  assert.equal(result.error, CANCELLED);
  assert.equal(result.sessionLost, undefined);
  assert.equal(result.stdout, "partial\n", "output produced before the cancel is kept");
});

Deno.test("runResult() keeps the result of a run that finished before its cancel landed", () => {
  const result = runResult({ type: "done", id: "r", status: "ok", value: "1" }, record({ cancelled: true }));
  assert.equal(result.status, "ok");
  assert.equal(result.value, "1");
});

Deno.test("runResult() says the sandbox was killed when the host had to stop the run", () => {
  const timeout = runResult({ stopped: "deadline" }, record({ timeoutSeconds: 5 }));
  assert.deepEqual([timeout.status, timeout.sessionLost], ["timeout", true]);
  assert.match(
    timeout.error!,
    /Timed out after 5s and did not stop when interrupted; the sandbox was killed/,
  );
  const cancelled = runResult({ stopped: "cancelled" }, record());
  assert.deepEqual([cancelled.status, cancelled.sessionLost], ["cancelled", true]);
  const exited = runResult({ exited: "exit code 137" }, record());
  assert.deepEqual([exited.status, exited.error, exited.sessionLost], [
    "error",
    "The sandbox ended during the run (exit code 137)",
    true,
  ]);
  const broken = runResult({ channelFailed: "broken pipe" }, record());
  assert.equal(broken.error, "The sandbox channel failed: broken pipe");
});

Deno.test("runResult() notes output the sandbox dropped over the cap", () => {
  const result = runResult({ type: "done", id: "r", status: "ok", dropped: { stdout: 500 } }, record());
  assert.equal(result.notes?.length, 1);
  assert.match(result.notes![0], /stdout/);
});
