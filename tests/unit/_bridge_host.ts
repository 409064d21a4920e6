/**
 * Test helper: a fake host answering the sandbox's discovery calls in the shapes the real one does
 * (core/host_api/api.ts, built from the same core/catalog/docs.ts views), for one server, "my-server".
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import { toolDoc, toolFull, toolSummary } from "../../core/catalog/docs.ts";
import type { RpcAnswer, RpcFrame } from "./_local_python.ts";

const SERVER = { name: "my-server", alias: "my_server", transport: "stdio" };

/** The tools of "my-server", as tools/list gives them. */
export const TOOLS: Tool[] = [
  {
    name: "echo",
    description: "Echoes back the input",
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  },
  { name: "get-file", inputSchema: { type: "object", properties: { path: { type: "string" } } } },
];

const docs = TOOLS.map((tool) => toolDoc(SERVER.name, tool));

/**
 * Answers list_servers, describe_server(s), list_tools, query_tool_docs, search_tool_docs and call_tool.
 */
export function bridgeHost(rpc: RpcFrame): RpcAnswer {
  const p = rpc.params;
  switch (rpc.method) {
    case "list_servers":
      return { value: [SERVER] };
    case "describe_server":
      return { value: { ...SERVER, tools: docs.map(toolFull) } };
    case "describe_servers":
      return { value: [{ ...SERVER, tools: docs.map(toolFull) }] };
    case "list_tools":
      return { value: docs.map(toolFull) };
    case "query_tool_docs": {
      const found = docs.filter((d) => p.tool === undefined || d.tool === p.tool);
      return { value: found.map(p.detail === "full" ? toolFull : toolSummary) };
    }
    case "search_tool_docs":
      return {
        value: docs.slice(0, Number(p.limit)).map((d, i) => ({
          server: d.server,
          tool: d.tool,
          description: d.description ?? "",
          score: 1 - i / 10,
          ...(p.detail === "full" ? toolFull(d) : { alias: toolSummary(d).alias }),
        })),
      };
    case "call_tool":
      return { value: { called: p.tool, arguments: p.arguments } };
    default:
      return { error: { type: "NotImplementedError", message: `Unknown host method "${rpc.method}"` } };
  }
}
