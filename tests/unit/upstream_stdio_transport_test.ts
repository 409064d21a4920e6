import assert from "node:assert/strict";
import { replyId } from "../../core/upstream/stdio_transport.ts";

Deno.test("replyId() reads the id of a TypeScript SDK reply from its tail", () => {
  assert.equal(
    replyId('{"result":{"content":[{"type":"text","text":"yyyy', 'yyyy"}]},"jsonrpc":"2.0","id":17}'),
    17,
  );
  assert.equal(replyId('{"error":{"code":1,"message":"', 'x"},"jsonrpc":"2.0","id":"abc"}\r'), "abc");
});

Deno.test("replyId() reads the id of a reply that starts with it", () => {
  assert.equal(replyId('{"jsonrpc": "2.0", "id": 5, "result": {"content": [', "...]}}"), 5);
  assert.equal(replyId('{"jsonrpc":"2.0","id":"a\\"b","error":{', "}}"), 'a"b');
});

Deno.test("replyId() refuses requests, notifications and nested ids", () => {
  assert.equal(
    replyId('{"method":"sampling/createMessage","params":{', '},"jsonrpc":"2.0","id":3}'),
    undefined,
  );
  assert.equal(replyId('{"jsonrpc":"2.0","id":3,"method":"x","params":{', "}}"), undefined);
  assert.equal(replyId('{"result":{"items":[{"id":4', '"id":4}]}}'), undefined);
  assert.equal(replyId('{"result":{"x":{"id":4}', '{"id":4}}'), undefined);
  assert.equal(replyId("garbage", "garbage"), undefined);
});
