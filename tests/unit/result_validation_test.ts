/** Results checked against a tool's outputSchema in a worker thread, with a deadline. */
import assert from "node:assert/strict";
import { checkToolResult, ResultValidator } from "../../core/upstream/result_validation.ts";

const redos = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } };

Deno.test({
  name: "a backtracking outputSchema costs a worker its deadline, never the event loop, and is not run again",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const validator = new ResultValidator({ deadlineMs: 500 });
    try {
      // Warm: the worker's start is no part of the check.
      assert.equal(await validator.check({ type: "number" }, 1), undefined);
      let longest = 0;
      let last = performance.now();
      const ticker = setInterval(() => {
        longest = Math.max(longest, performance.now() - last);
        last = performance.now();
      }, 5);
      const started = performance.now();
      const verdict = await validator.check(redos, { s: "a".repeat(40) + "!" });
      const took = performance.now() - started;
      clearInterval(ticker);
      // Under Bun's regex engine the pattern may not backtrack; either way it must be answered in time.
      assert.ok(verdict, "the almost-matching string must not pass");
      assert.ok(took < 5_000, `took ${took} ms`);
      assert.ok(longest < 400, `the event loop stalled for ${longest} ms`);
      if (/took longer than 500 ms/.test(verdict)) {
        const again = performance.now();
        assert.match((await validator.check(redos, { s: "aa" }))!, /took longer than 500 ms .* before/);
        assert.ok(performance.now() - again < 100, "an overrun schema is refused at once");
      }
      // The next schema gets a fresh worker and a normal answer.
      assert.match((await validator.check({ type: "string" }, 5))!, /does not match the tool's outputSchema/);
    } finally {
      validator.close();
    }
  },
});

Deno.test({
  name: "checkToolResult() checks structured content only where the tool declares an outputSchema",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const validator = new ResultValidator();
    try {
      const tool = { name: "add", outputSchema: { type: "object", properties: { sum: { type: "number" } } } };
      const ok = { content: [], structuredContent: { sum: 3 } };
      assert.equal(await checkToolResult(validator, tool, ok), undefined);
      assert.match(
        (await checkToolResult(validator, tool, { content: [], structuredContent: { sum: "3" } }))!,
        /data\/sum must be number/,
      );
      assert.match((await checkToolResult(validator, tool, { content: [] }))!, /has no structuredContent/);
      assert.equal(await checkToolResult(validator, tool, { content: [], isError: true }), undefined);
      assert.equal(await checkToolResult(validator, { name: "plain" }, { content: [] }), undefined);
      const bad = { name: "bad", outputSchema: { type: "object", properties: { s: { pattern: "(" } } } };
      assert.match((await checkToolResult(validator, bad, ok))!, /cannot be compiled/);
    } finally {
      validator.close();
    }
  },
});
