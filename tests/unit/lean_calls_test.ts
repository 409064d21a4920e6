/**
 * LeanToolCalls with a fake connection: what it sends, how it settles each kind of response, and that
 * timeouts, aborts and a closed connection fail calls the way the SDK client does (the errors
 * upstream/errors.ts explains). The real servers' side is in tests/integration/upstream_*_test.ts.
 */
import assert from "node:assert/strict";
import { ProtocolError, SdkError, SdkErrorCode } from "@modelcontextprotocol/client";
import type { JSONRPCMessage } from "@modelcontextprotocol/client";
import { LeanToolCalls } from "../../core/upstream/lean_calls.ts";

/** Calls over a fake connection that records what was sent. */
function lean() {
  const sent: Record<string, unknown>[] = [];
  const calls = new LeanToolCalls((message: JSONRPCMessage) => {
    sent.push(message as Record<string, unknown>);
    return Promise.resolve();
  });
  /** Answers the last request with `reply` (its id filled in), as the transport would hand it over. */
  const answer = (reply: Record<string, unknown>, id = sent.at(-1)!.id) => {
    const message = { jsonrpc: "2.0", id, ...reply };
    return calls.take(message, JSON.stringify(message));
  };
  return { calls, sent, answer };
}

const options = { timeout: 10_000 };

Deno.test("a lean call sends tools/call with an id of its own and resolves with the result and the reply's text", async () => {
  const { calls, sent, answer } = lean();
  const call = calls.call("echo", { message: "hi" }, options);
  assert.deepEqual(sent[0], {
    jsonrpc: "2.0",
    id: "codemode-1",
    method: "tools/call",
    params: { name: "echo", arguments: { message: "hi" } },
  });
  assert.equal(answer({ result: { content: [{ type: "text", text: "Echo: hi" }] } }), true);
  const reply = await call;
  assert.deepEqual(reply.result, { content: [{ type: "text", text: "Echo: hi" }] });
  assert.deepEqual(JSON.parse(reply.json!).result, reply.result);
  assert.equal(calls.open, 0);
});

Deno.test("responses to other ids are left to the SDK client, late ones are swallowed", () => {
  const { calls, answer } = lean();
  assert.equal(answer({ result: { content: [] } }, 7), false, "a numeric id is the SDK client's");
  assert.equal(answer({ result: { content: [] } }, "other-1"), false);
  assert.equal(answer({ result: { content: [] } }, "codemode-99"), true, "ours, but nobody waits any more");
  assert.equal(calls.open, 0);
});

Deno.test("JSON-RPC errors, invalid results and broken envelopes reject with the SDK's errors", async () => {
  const { calls, answer } = lean();
  const failed = calls.call("x", {}, options);
  answer({ error: { code: -32602, message: "bad params", data: { why: 1 } } });
  await assert.rejects(failed, (error: Error) => {
    assert.ok(error instanceof ProtocolError);
    assert.equal(error.code, -32602);
    assert.match(error.message, /bad params/);
    return true;
  });
  const invalid = calls.call("x", {}, options);
  answer({ result: { content: "text" } });
  await assert.rejects(
    invalid,
    (error: Error) =>
      error instanceof SdkError && error.code === SdkErrorCode.InvalidResult &&
      /Invalid result for tools\/call: content/.test(error.message),
  );
  for (
    const broken of [{ jsonrpc: "1.0", result: { content: [] } }, { result: { content: [] }, error: {} }]
  ) {
    const call = calls.call("x", {}, options);
    answer(broken);
    await assert.rejects(call, /Invalid JSON-RPC response to tools\/call/);
  }
  const notAnError = calls.call("x", {}, options);
  answer({ error: "broken" });
  await assert.rejects(notAnError, /Invalid error response/);
});

Deno.test("a timeout rejects with the SDK's RequestTimeout and tells the server, and one timer serves every call", async () => {
  const { calls, sent, answer } = lean();
  const slow = calls.call("slow", {}, { timeout: 30 });
  const quick = calls.call("quick", {}, { timeout: 5_000 });
  answer({ result: { content: [] } }, "codemode-2");
  await quick;
  const started = performance.now();
  await assert.rejects(
    slow,
    (error: Error) => error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout,
  );
  assert.ok(performance.now() - started < 2_000);
  assert.deepEqual(sent.at(-1), {
    jsonrpc: "2.0",
    method: "notifications/cancelled",
    params: { requestId: "codemode-1", reason: "SdkError: Request timed out" },
  });
  // A later call with a shorter timeout than the one armed still times out on time.
  const long = calls.call("long", {}, { timeout: 60_000 });
  const short = calls.call("short", {}, { timeout: 20 });
  await assert.rejects(short, /Request timed out/);
  answer({ result: { content: [] } }, "codemode-3");
  await long;
  assert.equal(calls.open, 0);
});

Deno.test("aborting the run's signal cancels its open calls, and only those", async () => {
  const { calls, sent, answer } = lean();
  const run = new AbortController();
  const first = calls.call("a", {}, { ...options, signal: run.signal });
  const second = calls.call("b", {}, { ...options, signal: run.signal });
  const other = calls.call("c", {}, options);
  run.abort("the run ended");
  await assert.rejects(first, /the run ended/);
  await assert.rejects(second, /the run ended/);
  const cancelled = sent.filter((m) => m.method === "notifications/cancelled").map((m) =>
    (m.params as { requestId: string }).requestId
  );
  assert.deepEqual(cancelled, ["codemode-1", "codemode-2"]);
  answer({ result: { content: [] } }, "codemode-3");
  await other;
  await assert.rejects(calls.call("d", {}, { ...options, signal: run.signal }), /the run ended/);
});

Deno.test("a closed connection fails every open call and every later one with ConnectionClosed", async () => {
  const { calls } = lean();
  const open = [calls.call("a", {}, options), calls.call("b", {}, options)];
  calls.closed();
  for (const call of [...open, calls.call("c", {}, options)]) {
    await assert.rejects(
      call,
      (error: Error) => error instanceof SdkError && error.code === SdkErrorCode.ConnectionClosed,
    );
  }
});

Deno.test("a request that cannot be written fails its call", async () => {
  const calls = new LeanToolCalls(() => Promise.reject(new Error("EPIPE")));
  await assert.rejects(calls.call("a", {}, options), /EPIPE/);
  assert.equal(calls.open, 0);
});
