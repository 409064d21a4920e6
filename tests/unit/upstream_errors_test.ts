import assert from "node:assert/strict";
import { ProtocolError, SdkError, SdkErrorCode } from "@modelcontextprotocol/client";
import {
  explainCallFailure,
  MESSAGE_TOO_LARGE,
  UnknownServerError,
  UpstreamCallError,
  UpstreamExitedError,
  UpstreamResultTooLargeError,
  UpstreamTimeoutError,
} from "../../core/upstream/errors.ts";

const context = { server: "github", tool: "search", timeoutMs: 500, remote: false };

Deno.test("explainCallFailure() reports a server that ended during the call, with its stderr", () => {
  const error = explainCallFailure(new SdkError(SdkErrorCode.ConnectionClosed, "Connection closed"), {
    ...context,
    ended: "exited (code 3)",
    stderrTail: "panic: out of tokens",
  });
  assert.ok(error instanceof UpstreamExitedError);
  assert.equal(
    error.message,
    'MCP server "github" exited (code 3) during the call to "search"; the next call restarts it; ' +
      "its stderr ends with: panic: out of tokens",
  );
  assert.equal(error.server, "github");
  assert.equal(error.tool, "search");
});

Deno.test("explainCallFailure() says a remote server is reconnected, not restarted", () => {
  const error = explainCallFailure(new TypeError("fetch failed"), {
    ...context,
    remote: true,
    ended: "lost the connection (fetch failed)",
  });
  assert.match(
    error.message,
    /"github" lost the connection \(fetch failed\) during the call to "search"; the next call reconnects it$/,
  );
});

Deno.test("explainCallFailure() turns SDK timeouts into UpstreamTimeoutError with the timeout", () => {
  const error = explainCallFailure(new SdkError(SdkErrorCode.RequestTimeout, "Request timed out"), context);
  assert.ok(error instanceof UpstreamTimeoutError);
  assert.equal(error.timeoutMs, 500);
  assert.match(
    error.message,
    /^The call to "search" on MCP server "github" timed out after 500 ms and was cancelled/,
  );
});

Deno.test("explainCallFailure() recognises the transport's oversized-reply error", () => {
  const error = explainCallFailure(
    new ProtocolError(
      MESSAGE_TOO_LARGE,
      "The server replied with a message of 70 MiB, over the 64 MiB limit",
    ),
    context,
  );
  assert.ok(error instanceof UpstreamResultTooLargeError);
  assert.match(error.message, /\(a message of 70 MiB, over the 64 MiB limit\); ask the tool for less/);
});

Deno.test("explainCallFailure() puts other errors on one clipped line", () => {
  const error = explainCallFailure(
    new ProtocolError(-32602, `Invalid params:\n  ${"x".repeat(2000)}`),
    context,
  );
  assert.ok(error instanceof UpstreamCallError);
  assert.ok(error.message.startsWith('MCP server "github" failed the call to "search": Invalid params: xxx'));
  assert.ok(!error.message.includes("\n"));
  assert.ok(error.message.length < 700);
});

Deno.test("explainCallFailure() passes UpstreamErrors through unchanged", () => {
  const original = new UnknownServerError("x", []);
  assert.equal(explainCallFailure(original, context), original);
  assert.equal(original.message, 'Unknown MCP server "x": configured servers are none');
});
