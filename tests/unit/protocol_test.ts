/** The host's check of frames from the sandbox: the hand-written rpc check agrees with the schema. */
import assert from "node:assert/strict";
import { SandboxFrame, sandboxFrame } from "../../core/sandbox/protocol.ts";

const RPC_FRAMES: unknown[] = [
  { type: "rpc", id: 1, method: "call_tool", params: { server: "s", tool: "t", arguments: {} } },
  { type: "rpc", id: "a", method: "list_servers" },
  { type: "rpc", id: 2.5, method: "m", params: {}, extra: "dropped" },
  { type: "rpc", id: -0, method: "x".repeat(64), params: { nested: [1, { a: null }] } },
  { type: "rpc", id: 3, method: "x".repeat(65), params: {} },
  { type: "rpc", id: null, method: "m", params: {} },
  { type: "rpc", id: true, method: "m" },
  { type: "rpc", id: 1, method: 5, params: {} },
  { type: "rpc", id: 1, params: {} },
  { type: "rpc", id: 1, method: "m", params: [] },
  { type: "rpc", id: 1, method: "m", params: "p" },
  { type: "rpc", id: 1, method: "m", params: null },
  { type: "rpc", id: { n: 1 }, method: "m" },
  { type: "rpc" },
  { type: "rpc", id: 4, method: "call_tool", params: {}, job: "job-3" },
  { type: "rpc", id: 4, method: "call_tool", job: "j".repeat(64) },
  { type: "rpc", id: 4, method: "call_tool", params: {}, job: "j".repeat(65) },
  { type: "rpc", id: 4, method: "call_tool", params: {}, job: 3 },
  { type: "rpc", id: 4, method: "call_tool", params: {}, job: null },
];

Deno.test("sandboxFrame() accepts and shapes rpc frames exactly as the SandboxFrame schema does", () => {
  for (const raw of RPC_FRAMES) {
    const schema = SandboxFrame.safeParse(raw);
    assert.deepEqual(sandboxFrame(raw), schema.success ? schema.data : undefined, JSON.stringify(raw));
  }
});

Deno.test("sandboxFrame() checks every other frame with the schema", () => {
  assert.deepEqual(sandboxFrame({ type: "ready", python: "3.11" }), { type: "ready", python: "3.11" });
  assert.deepEqual(sandboxFrame({ type: "output", stream: "stdout", data: "x", id: "r" }), {
    type: "output",
    stream: "stdout",
    data: "x",
    id: "r",
  });
  assert.equal(sandboxFrame({ type: "output", stream: "stdin", data: "x" }), undefined);
  assert.equal(sandboxFrame({ type: "nope" }), undefined);
  assert.equal(sandboxFrame(null), undefined);
  assert.equal(sandboxFrame([1]), undefined);
});
