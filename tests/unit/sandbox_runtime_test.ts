/**
 * Unit tests of the sandbox's Python logic, run with the host's own python3 (no container, no
 * isolation): the test plays the host and speaks frames to the runtime over stdin/stdout.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  BOOTSTRAP_SOURCE,
  bootstrapCommand,
  bootstrapFrame,
  MODULES,
  PACKAGES,
} from "../../sandbox/source.ts";
import { LocalPython, type RpcAnswer, type RpcFrame, TEST_CONFIG, withPython } from "./_local_python.ts";
import { bridgeHost } from "./_bridge_host.ts";
import { toolStub } from "../../core/catalog/stubs.ts";

const echo = (rpc: RpcFrame): RpcAnswer => {
  if (rpc.method !== "call_tool") {
    return { error: { type: "RuntimeError", message: `Unexpected ${rpc.method}` } };
  }
  return { value: { tool: rpc.params.tool, arguments: rpc.params.arguments, raw: rpc.params.raw } };
};

// Shaped like the host's list_tools answer (core/catalog/docs.ts ToolSummary).
const tools = [
  { server: "my-server", tool: "echo", alias: "echo", description: "Echoes back the input" },
  { server: "my-server", tool: "get-file", alias: "get_file", description: "Reads a file" },
  { server: "my-server", tool: "read_file", alias: "read_file", description: "Reads another file" },
];

const docs = [{
  server: "my-server",
  tool: "echo",
  alias: "echo",
  description: "Echoes back the input message.",
  inputSchema: {
    type: "object",
    properties: {
      message: { type: "string", description: "What to echo" },
      times: { type: "integer", default: 1 },
      tags: { type: "array", items: { type: "string" } },
    },
    required: ["message"],
  },
  signature: "echo(message: str, times: int = 1, tags: list[str] = None)",
}];

const host = (rpc: RpcFrame): RpcAnswer => {
  if (rpc.method === "list_tools") return { value: tools };
  if (rpc.method === "query_tool_docs") return { value: docs };
  if (rpc.method === "stubs") return { value: toolStub(docs[0]) };
  return echo(rpc);
};

Deno.test("bootstrapCommand() runs python3 isolated with the bootstrap source", () => {
  assert.deepEqual(bootstrapCommand(), ["python3", "-I", "-c", BOOTSTRAP_SOURCE]);
  assert.equal(bootstrapCommand("/usr/bin/python3.11")[0], "/usr/bin/python3.11");
  assert.ok(BOOTSTRAP_SOURCE.length < 4000, `bootstrap is ${BOOTSTRAP_SOURCE.length} chars`);
});

Deno.test("bootstrapFrame() carries every module, the packages and the config", () => {
  const frame = bootstrapFrame(TEST_CONFIG);
  assert.equal(frame.type, "bootstrap");
  if (frame.type !== "bootstrap") return;
  assert.deepEqual(Object.keys(frame.modules).sort(), Object.keys(MODULES).sort());
  assert.deepEqual(frame.packages, [...PACKAGES]);
  assert.equal(frame.main, "codemode_runtime.process");
  assert.deepEqual(frame.config, TEST_CONFIG);
  for (const name of ["mcp", "mcp.runtime", "mcp.servers", "codemode_runtime.kernel"]) {
    assert.ok(name in frame.modules);
  }
});

Deno.test("the runtime says ready with its Python version, prints and keeps globals", async () => {
  const python = LocalPython.start();
  try {
    const ready = await python.next();
    assert.equal(ready.type, "ready");
    assert.match(ready.type === "ready" ? ready.python ?? "" : "", /^3\.\d+\.\d+/);
    const printed = await python.execute("print('hello')\nx = 41");
    assert.equal(printed.stdout, "hello\n");
    assert.deepEqual(printed.done, { type: "done", id: printed.done.id, status: "ok" });
    assert.equal(printed.outputs[0].id, printed.done.id);
    const value = await python.execute("x + 1");
    assert.equal(value.done.value, "42");
    assert.equal((await python.execute("None")).done.value, undefined);
    assert.equal((await python.execute("'a' * 3")).done.value, "'aaa'");
    assert.equal(
      (await python.execute("import sys; __name__, sys.modules['__main__'].x")).done.value,
      "('__main__', 41)",
    );
  } finally {
    await python.close();
  }
});

Deno.test("an execute frame sent together with the bootstrap frame is not lost", async () => {
  const execute = JSON.stringify({ type: "execute", id: "early", code: "1 + 1", timeout: 5 }) + "\n";
  const python = LocalPython.start(TEST_CONFIG, execute);
  try {
    assert.equal((await python.next()).type, "ready");
    const done = await python.next();
    assert.deepEqual(done, { type: "done", id: "early", status: "ok", value: "2" });
  } finally {
    await python.close();
  }
});

Deno.test("top-level await works and the event loop persists across executes", async () => {
  await withPython(async (python) => {
    await python.execute("import asyncio\nasync def f(x):\n    await asyncio.sleep(0.01)\n    return x * 2");
    assert.equal((await python.execute("await f(21)")).done.value, "42");
    await python.execute("task = asyncio.get_event_loop().create_task(f(5))");
    assert.equal((await python.execute("await task")).done.value, "10");
    const run = await python.execute("asyncio.run(f(1))");
    assert.equal(run.done.value, "2", "asyncio.run works in a cell without top-level await");
    assert.equal((await python.execute("await f(3)")).done.value, "6");
  });
});

Deno.test("tracebacks show only the user's frames with the right lines, even across cells", async () => {
  await withPython(async (python) => {
    await python.execute("def inner():\n    return 1 / 0\n");
    const { done } = await python.execute("x = 1\ninner()");
    assert.equal(done.status, "error");
    assert.equal(
      done.error,
      'Traceback (most recent call last):\n  File "<run_python>", line 2, in <module>\n    inner()\n' +
        '  File "<run_python>", line 2, in inner\n    return 1 / 0\nZeroDivisionError: division by zero\n',
    );
    const tool = await python.execute("await mcp_my_server.echo(message='x')", {
      answer: () => ({ error: { type: "ToolError", message: "boom" } }),
    });
    assert.doesNotMatch(tool.done.error ?? "", /codemode/);
    assert.match(tool.done.error ?? "", /^Traceback[^]*line 1, in <module>\n[^]*mcp\.ToolError: boom\n$/);
    const stdlib = await python.execute("import json\njson.loads('{')");
    assert.match(stdlib.done.error ?? "", /json\/decoder\.py/, "library frames the user called stay");
  });
});

Deno.test("a SyntaxError is reported cleanly without a runtime traceback", async () => {
  await withPython(async (python) => {
    const { done } = await python.execute("x = 1\ny = (");
    assert.equal(done.status, "error");
    assert.match(
      done.error ?? "",
      /^ {2}File "<run_python>", line 2\n[^]*SyntaxError: '\(' was never closed\n$/,
    );
    assert.equal((await python.execute("x = 1\nx")).done.value, "1");
  });
});

Deno.test("output of os.system, os.write and stderr is captured and sent before done", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "import os, sys\nos.system('echo hi')\nos.write(1, b'raw\\n')\nprint('err', file=sys.stderr)\nsys.stdout.write('tail')",
    );
    assert.equal(run.stdout, "hi\nraw\ntail");
    assert.equal(run.stderr, "err\n");
  });
});

Deno.test("binary output is decoded with replacement characters and does not break frames", async () => {
  await withPython(async (python) => {
    const run = await python.execute("import os\nos.write(1, bytes(range(256)))");
    assert.equal(run.done.value, "256");
    assert.equal(
      run.stdout.slice(0, 128),
      Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join(""),
    );
    assert.equal(run.stdout.slice(128), "\ufffd".repeat(128));
    const split = await python.execute("os.write(1, 'é'.encode()[:1])\nos.write(1, b'!')");
    assert.equal(split.stdout, "\ufffd!");
  });
});

Deno.test("output past max_output is dropped and counted per stream", async () => {
  await withPython(async (python) => {
    const run = await python.execute("import sys\nprint('a' * 1500)\nprint('b' * 10, file=sys.stderr)");
    assert.equal(run.stdout, "a".repeat(1000));
    assert.equal(run.stderr, "b".repeat(10) + "\n");
    assert.deepEqual(run.done.dropped, { stdout: 501, stderr: 0 });
    const next = await python.execute("print('c' * 999)");
    assert.equal(next.stdout, "c".repeat(999) + "\n", "the cap is per execution");
    assert.equal(next.done.dropped, undefined);
  }, { ...TEST_CONFIG, max_output: 1000 });
});

Deno.test("10 MB written without a newline arrives in 64 KiB frames and the session goes on", async () => {
  await withPython(async (python) => {
    const run = await python.execute("import sys\nsys.stdout.write('x' * 10_000_000)", { timeout: 60 });
    assert.equal(run.done.status, "ok");
    assert.equal(run.stdout.length, 10_000_000);
    assert.ok(run.outputs.every((frame) => frame.data.length <= 64 * 1024));
    assert.equal((await python.execute("print('after')")).stdout, "after\n");
  }, { ...TEST_CONFIG, max_output: 16 * 1024 * 1024 });
});

Deno.test("closing fds 0 and 1 in user code does not break the next execute", async () => {
  await withPython(async (python) => {
    assert.equal((await python.execute("import os\nos.close(0)")).done.status, "ok");
    assert.equal((await python.execute("print('still here')")).stdout, "still here\n");
    await python.execute("os.close(1)");
    assert.equal((await python.execute("print('restored')")).stdout, "restored\n");
    const input = await python.execute("input()");
    assert.match(input.done.error ?? "", /EOFError/, "stdin reads as empty, never the protocol");
  });
});

Deno.test("sys.exit(), fork() and closing the event loop in user code do not end the session", async () => {
  await withPython(async (python) => {
    const exit = await python.execute("import sys\nsys.exit(3)");
    assert.equal(exit.done.status, "error");
    assert.match(exit.done.error ?? "", /SystemExit: 3\n$/);
    const fork = await python.execute(
      "import os\npid = os.fork()\nprint('child' if pid == 0 else 'parent')\npid > 0",
    );
    assert.equal(fork.done.value, "True", "the child never sends a done frame of its own");
    assert.match(fork.stdout, /parent/);
    await python.execute("import asyncio\nasyncio.get_event_loop().close()");
    assert.equal(
      (await python.execute("import asyncio\nawait asyncio.sleep(0)\n'loop ok'")).done.value,
      "'loop ok'",
    );
    assert.equal((await python.execute("'next'")).done.value, "'next'", "no stray frame from the child");
  });
});

Deno.test("a busy loop and a blocking sleep time out and the session stays usable", async () => {
  await withPython(async (python) => {
    await python.execute("kept = 'yes'");
    for (
      const code of [
        "while True: pass",
        "import time\ntime.sleep(100)",
        "import asyncio\nawait asyncio.sleep(100)",
      ]
    ) {
      const started = performance.now();
      const { done } = await python.execute(code, { timeout: 0.5 });
      const elapsed = performance.now() - started;
      assert.equal(done.status, "timeout", code);
      assert.match(done.error ?? "", /^Timed out after 0\.5s/);
      assert.ok(elapsed < 2500, `${code}: took ${elapsed} ms`);
      assert.equal((await python.execute("kept")).done.value, "'yes'");
    }
    const busy = await python.execute("async def spin():\n    while True: pass\nawait spin()", {
      timeout: 0.5,
    });
    assert.equal(busy.done.status, "timeout");
    assert.match(busy.done.error ?? "", /line 2, in spin/);
    assert.equal((await python.execute("1 + 1")).done.value, "2");
  });
});

Deno.test("a tool call round trip goes through the host, with aliases mapped back to tool names", async () => {
  await withPython(async (python) => {
    const run = await python.execute("await mcp_my_server.echo(message='hi')", { answer: host });
    assert.equal(run.rpcs.length, 1);
    assert.deepEqual(run.rpcs[0].params, {
      server: "my-server",
      tool: "echo",
      arguments: { message: "hi" },
      raw: false,
    });
    assert.equal(run.done.value, "{'tool': 'echo', 'arguments': {'message': 'hi'}, 'raw': False}");
    const aliased = await python.execute("await mcp_servers['my-server'].get_file(path='/x', raw=True)", {
      answer: host,
    });
    assert.deepEqual(aliased.rpcs.map((rpc) => rpc.method), ["list_tools", "call_tool"]);
    assert.deepEqual(aliased.rpcs[1].params, {
      server: "my-server",
      tool: "get-file",
      arguments: { path: "/x" },
      raw: true,
    });
    const exact = await python.execute("await mcp_my_server.read_file(path='/y')", { answer: host });
    assert.deepEqual(exact.rpcs.map((rpc) => rpc.params.tool), ["read_file"], "the tool list is cached");
    const helper = await python.execute(
      "from mcp import runtime\nawait runtime.call_tool('my_server', 'get_file', {'path': '/z'})",
      { answer: host },
    );
    assert.deepEqual(helper.rpcs[0].params, {
      server: "my-server",
      tool: "get-file",
      arguments: { path: "/z" },
      raw: false,
    });
  });
});

Deno.test("100 calls under asyncio.gather are all sent before any answer comes back", async () => {
  await withPython(async (python) => {
    python.send({
      type: "execute",
      id: "gather",
      code:
        "import asyncio\nr = await asyncio.gather(*[mcp_my_server.echo(message=str(i)) for i in range(100)])\n" +
        "[x['arguments']['message'] for x in r] == [str(i) for i in range(100)]",
      timeout: 20,
    });
    const rpcs: RpcFrame[] = [];
    while (rpcs.length < 100) {
      const frame = await python.next();
      assert.equal(frame.type, "rpc", `frame ${rpcs.length} is ${JSON.stringify(frame)}`);
      if (frame.type === "rpc") rpcs.push(frame);
    }
    assert.equal(new Set(rpcs.map((rpc) => rpc.id)).size, 100);
    for (const rpc of rpcs.reverse()) python.answer(rpc, echo(rpc));
    assert.deepEqual(await python.next(), { type: "done", id: "gather", status: "ok", value: "True" });
  });
});

Deno.test("tool errors raise ToolError with the host's message; other errors raise their own type", async () => {
  await withPython(async (python) => {
    const caught = await python.execute(
      "from mcp import ToolError as E\nassert E is ToolError\n" +
        "try:\n    await mcp_my_server.echo(message='x')\nexcept ToolError as e:\n    r = (str(e), e.server, e.tool)\nr",
      { answer: () => ({ error: { type: "ToolError", message: "Disk is full" } }) },
    );
    assert.equal(caught.done.value, "('Disk is full', 'my-server', 'echo')");
    const other = await python.execute("await mcp_my_server.echo()", {
      answer: () => ({ error: { type: "TimeoutError", message: "Tool call timed out" } }),
    });
    assert.match(other.done.error ?? "", /\nTimeoutError: Tool call timed out\n$/);
    // A type the sandbox doesn't know is runtime.MCPError itself, naming the host's type.
    const unknown = await python.execute("await mcp_my_server.echo()", {
      answer: () => ({ error: { type: "ServerGone", message: "It crashed" } }),
    });
    assert.match(unknown.done.error ?? "", /\nmcp\.MCPError: ServerGone: It crashed\n$/);
  });
});

Deno.test("binary markers anywhere in a result decode to bytes with a mime_type", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "r = await mcp_my_server.shot()\n" +
        "(r['img'], r['img'].mime_type, isinstance(r['img'], bytes), r['all'][0][0], r['all'][0][0].mime_type)",
      {
        answer: () => ({
          value: {
            img: { __codemode_bytes__: "iVBORw==", mime_type: "image/png" },
            all: [[{ __codemode_bytes__: "AAE=" }]],
          },
        }),
      },
    );
    assert.equal(
      run.done.value,
      "(MimeBytes(<4 bytes>, mime_type='image/png'), 'image/png', True, " +
        "MimeBytes(<2 bytes>, mime_type='application/octet-stream'), 'application/octet-stream')",
    );
    assert.equal((await python.execute("bytes(r['img'])")).done.value, String.raw`b'\x89PNG'`);
  });
});

Deno.test("a frame over 16 MiB is refused with ValueError and the session survives", async () => {
  await withPython(async (python) => {
    const run = await python.execute("await mcp_my_server.echo(message='x' * 17_000_000)");
    assert.equal(run.rpcs.length, 0);
    assert.match(run.done.error ?? "", /ValueError: Frame 'rpc' is \d+ bytes, over the 16777216 byte limit/);
    assert.equal((await python.execute("'ok'")).done.value, "'ok'");
  });
});

Deno.test("help() shows a tool's stub: its typed signature, description and arguments", async () => {
  await withPython(async (python) => {
    const run = await python.execute("help(mcp_my_server.echo)", { answer: host });
    assert.deepEqual(run.rpcs.map((rpc) => [rpc.method, rpc.params]), [
      ["stubs", { server: "my-server", tool: "echo" }],
    ]);
    assert.match(run.stdout, /echo\(\*, message: str, times: int = 1, tags: list\[str\] = \.\.\.\) -> Any/);
    assert.match(
      run.stdout,
      /async def echo\(\*, message: str, times: int = 1, tags: list\[str\] = \.\.\.\) -> Any:/,
    );
    assert.match(run.stdout, /Echoes back the input message\./);
    assert.match(run.stdout, /message: What to echo/);
    const listed = await python.execute("dir(mcp_my_server)", { answer: host });
    assert.equal(listed.done.value, "['echo', 'get_file', 'read_file']");
  });
});

Deno.test("tools import from mcp.servers.<alias>, one by one or with *", async () => {
  await withPython(async (python) => {
    const one = await python.execute("from mcp.servers.my_server import echo\nawait echo(message='m')", {
      answer: host,
    });
    assert.equal(one.done.value, "{'tool': 'echo', 'arguments': {'message': 'm'}, 'raw': False}");
    const star = await python.execute(
      "from mcp.servers.my_server import *\nget_file.__name__, read_file.__name__",
      {
        answer: host,
      },
    );
    assert.equal(star.done.value, "('get_file', 'read_file')");
    const missing = await python.execute("import mcp.servers.nope");
    assert.match(missing.done.error ?? "", /ModuleNotFoundError: No module named 'mcp\.servers\.nope'/);
  });
});

Deno.test("import * exports only importable aliases; colliding aliases go to the first tool listed, as on the host", async () => {
  const odd = [
    { server: "my-server", tool: "get-file", alias: "get_file", description: "first" },
    { server: "my-server", tool: "get.file", alias: "get_file", description: "second" },
    { server: "my-server", tool: "__init__", alias: "__init__", description: "dunder" },
    { server: "my-server", tool: "__secret", alias: "__secret", description: "private" },
    { server: "my-server", tool: "class", alias: "class", description: "keyword" },
    { server: "my-server", tool: "ok", alias: "ok", description: "plain" },
  ];
  const answer = (rpc: RpcFrame): RpcAnswer => rpc.method === "list_tools" ? { value: odd } : echo(rpc);
  await withPython(async (python) => {
    const star = await python.execute(
      "from mcp.servers.my_server import *\nimport mcp.servers.my_server as m\n(sorted(m.__all__), ok.__name__)",
      { answer },
    );
    assert.equal(star.done.error, undefined, star.done.error);
    assert.equal(star.done.value, "(['get_file', 'ok'], 'ok')");
    const called = await python.execute("(await mcp_my_server.get_file())['tool']", { answer });
    assert.equal(called.done.value, "'get-file'");
    const listed = await python.execute("dir(mcp_my_server).count('get_file')", { answer });
    assert.equal(listed.done.value, "1");
  });
});

Deno.test("mcp.runtime helpers answer locally or through the documented rpc methods", async () => {
  await withPython(async (python) => {
    const local = await python.execute(
      "import re\nfrom mcp import runtime\ns = runtime.capability_summary()\n(runtime.discovered_servers(), runtime.discovered_servers(detailed=True), " +
        "'search_tool_docs' in s, runtime.list_loaded_server_metadata(), " +
        "re.findall(r'\\.[`A-Z]', s))",
    );
    // capability_summary() asks the host for the saved skills, and list_loaded_server_metadata() for the tools
    // of servers not listed yet (both unanswered here: the skills are left out, the server has no tools).
    assert.deepEqual(local.rpcs.map((rpc) => [rpc.method, rpc.params]), [
      ["list_skills", {}],
      ["describe_servers", { names: ["my-server"] }],
    ]);
    assert.equal(
      local.done.value,
      "(('my-server',), ({'name': 'my-server', 'description': 'A test server', 'alias': 'my_server'},), True, " +
        "({'name': 'my-server', 'description': 'A test server', 'alias': 'my_server', 'tools': [], 'cwd': None},), " +
        "[])",
    );
    const code = [
      "a = await runtime.list_servers()",
      "b = runtime.list_servers_sync()",
      "c = runtime.describe_server('my_server')",
      "d = await runtime.list_tools('my-server')",
      "e = runtime.list_tools_sync('my_server')",
      "f = await runtime.query_tool_docs('my_server', tool='echo', detail='full')",
      "g = runtime.query_tool_docs_sync('my_server')",
      "h = await runtime.search_tool_docs('echo things', limit=3)",
      "i = runtime.search_tool_docs_sync('echo', detail='FULL')",
      "j = [(m['name'], [t['name'] for t in m['tools']], 'input_schema' in m['tools'][0]) " +
      "for m in runtime.list_loaded_server_metadata()]",
      "j",
    ].join("\n");
    const remote = await python.execute(code, { answer: bridgeHost });
    // Listed above, so the metadata comes from what this sandbox knows: no further call.
    assert.equal(remote.done.value, "[('my-server', ['echo', 'get-file'], True)]");
    assert.deepEqual(remote.rpcs.map((rpc) => [rpc.method, rpc.params]), [
      ["list_servers", {}],
      ["list_servers", {}],
      ["describe_server", { name: "my-server" }],
      ["list_tools", { server: "my-server" }],
      ["list_tools", { server: "my-server" }],
      ["query_tool_docs", { server: "my-server", tool: "echo", detail: "full" }],
      ["query_tool_docs", { server: "my-server", detail: "summary" }],
      ["search_tool_docs", { query: "echo things", limit: 3 }],
      ["search_tool_docs", { query: "echo", limit: 5, detail: "full" }],
    ]);
    const bad = await python.execute("runtime.query_tool_docs_sync('my_server', detail='everything')");
    assert.match(bad.done.error ?? "", /ValueError: Unknown detail 'everything': use 'summary' or 'full'/);
  });
});

Deno.test("a shutdown frame and EOF on stdin both end the process promptly", async () => {
  const python = await LocalPython.ready();
  python.send({ type: "shutdown" });
  assert.equal(await python.exited, 0);
  python.child.stdin!.destroy();

  const eof = await LocalPython.ready();
  eof.send({ type: "execute", id: "sleepy", code: "import time\ntime.sleep(30)", timeout: 60 });
  const started = performance.now();
  eof.child.stdin!.end();
  assert.equal(await eof.exited, 0);
  assert.ok(performance.now() - started < 2000, "exits mid-execution");
});

Deno.test("EmbeddedSession drives the kernel frame by frame without threads, fds or signals", () => {
  // What a Pyodide host does, run here under CPython: install the modules in-process, pass frames in.
  const script = `
import asyncio, json, sys
ns = {"__name__": "codemode_bootstrap"}
exec(${JSON.stringify(BOOTSTRAP_SOURCE)}, ns)
ns["install"](*json.loads(sys.stdin.read()))
from codemode_runtime.embedded import EmbeddedSession
lines, real_stdout = [], sys.stdout
async def main():
    session = EmbeddedSession({"max_output": 8, "servers": [{"name": "s-1", "alias": "s_1"}]}, lines.append)
    lines.append(json.dumps(session.ready_frame()) + "\\n")
    def answer(line):
        frame = json.loads(line)
        if frame["type"] == "rpc":
            reply = {"type": "rpc_result", "id": frame["id"], "ok": True, "value": frame["params"].get("arguments")}
            asyncio.get_running_loop().call_later(0.01, asyncio.ensure_future, session.handle(json.dumps(reply)))
    session._write = lambda line: (lines.append(line), answer(line))
    await session.handle({"type": "execute", "id": "p1", "code": "print('hello'); print('world')\\n6 * 7", "timeout": 5})
    await session.handle({"type": "execute", "id": "p2", "code": "await mcp_s_1.echo(n=1)", "timeout": 5})
    await session.handle({"type": "execute", "id": "p3", "code": "from mcp import runtime\\nruntime.list_servers_sync()", "timeout": 5})
    await session.handle({"type": "execute", "id": "p4", "code": "import asyncio\\nawait asyncio.sleep(10)", "timeout": 0.2})
    await session.handle({"type": "execute", "id": "p5", "code": "1 + 1", "timeout": 5})
asyncio.run(main())
sys.stdout = real_stdout
print(json.dumps([json.loads(line) for line in lines]))
`;
  // The modules go in on stdin: as one argument they would pass Linux's 128 KiB limit on an argument.
  const result = spawnSync("python3", ["-I", "-c", script], {
    encoding: "utf8",
    input: JSON.stringify([MODULES, PACKAGES]),
  });
  assert.equal(result.error, undefined);
  assert.equal(result.stderr, "");
  const frames = JSON.parse(result.stdout);
  assert.equal(frames[0].type, "ready");
  assert.deepEqual(frames.slice(1, 4), [
    { type: "output", stream: "stdout", data: "hello\n", id: "p1" },
    { type: "output", stream: "stdout", data: "wo", id: "p1" },
    { type: "done", id: "p1", status: "ok", value: "42", dropped: { stdout: 4, stderr: 0 } },
  ]);
  assert.deepEqual(frames[4].params, { server: "s-1", tool: "echo", arguments: { n: 1 }, raw: false });
  assert.deepEqual(frames[5], { type: "done", id: "p2", status: "ok", value: "{'n': 1}" });
  assert.equal(frames[6].method, "list_servers", "sent, but its answer can't be waited for");
  assert.equal(frames[7].id, "p3");
  assert.match(frames[7].error, /RuntimeError: Blocking calls are not available in this sandbox/);
  assert.doesNotMatch(frames[7].error, /codemode/);
  assert.equal(frames[8].status, "timeout");
  assert.match(frames[8].error, /^Timed out after 0\.2s/);
  assert.deepEqual(frames[9], { type: "done", id: "p5", status: "ok", value: "2" });
  assert.equal(frames.length, 10);
});

Deno.test("the Python side of a print(1) round trip costs well under a millisecond", async () => {
  await withPython(async (python) => {
    for (let i = 0; i < 20; i++) await python.execute("print(1)");
    const samples: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      const run = await python.execute("print(1)");
      samples.push(performance.now() - started);
      assert.equal(run.stdout, "1\n");
    }
    samples.sort((a, b) => a - b);
    const median = samples[100];
    console.log(
      `print(1) round trip over local pipes: median ${median.toFixed(3)} ms, p90 ${
        samples[180].toFixed(3)
      } ms`,
    );
    assert.ok(median < 5, `median ${median} ms`);
  });
});
