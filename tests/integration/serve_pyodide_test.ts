/**
 * `codemode serve` on the embedded Pyodide runtime, with a real MCP client and real MCP servers from
 * npm: proxied calls behave as they do in containers.
 */
import assert from "node:assert/strict";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { serve } from "./_serve.ts";

const usable = (await pyodide().detect()).available;
if (!usable) console.warn("IGNORED serve on pyodide: deno or the Pyodide package is missing");

Deno.test({
  name: "sandbox code on pyodide calls real MCP servers: echo, sums, image bytes, gather, ToolError, search",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await serve({ CODEMODE_RUNTIME: "pyodide", CODEMODE_TIMEOUT: "60" });
    try {
      const r = await s.run(
        `
import asyncio
from mcp import runtime
echo = await mcp_everything.echo(message="hi")
total = await mcp_everything.get_sum(a=2, b=3)
image = [i for i in await mcp_everything.get_tiny_image() if isinstance(i, bytes)][0]
many = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(20)])
try:
    await mcp_everything.no_such_tool()
    missing = "no error"
except Exception as e:
    missing = type(e).__name__
hits = await runtime.search_tool_docs("sum of two numbers", limit=1)
(echo, total, image.mime_type, image[:4], len(many), missing, hits[0]["tool"])`,
        60,
      );
      assert.equal(r.isError, false, r.text);
      assert.equal(
        r.structured.value,
        "('Echo: hi', 'The sum of 2 and 3 is 5.', 'image/png', b'\\x89PNG', 20, 'AttributeError', 'get-sum')",
      );
      const again = await s.run("echo");
      assert.equal(again.text, "'Echo: hi'", "state persists between calls on pyodide too");
    } finally {
      await s.close();
    }
  },
});
