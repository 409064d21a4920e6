/**
 * The stub generator (core/catalog/stubs.ts): the reference servers' stubs and schemas with `$ref`,
 * `oneOf`, enums, nested objects, arrays of objects and nullable fields are valid Python (the host's
 * python3 parses them) and Debian's mypy accepts them in strict mode; what cannot be said is `Any`, never a
 * narrower type; hostile schemas (deep, huge, recursive, odd names and texts) cost little and break nothing.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tool } from "@modelcontextprotocol/client";
import { schemaType, serverStub, signatureLine, STUB_LIMITS, toolStub } from "../../core/catalog/stubs.ts";

const catalog = (name: string) =>
  JSON.parse(readFileSync(new URL(`../testdata/catalogs/${name}.json`, import.meta.url), "utf8")) as {
    server: string;
    tools: Tool[];
  };
const MYPY = "/usr/bin/mypy";

/** Tools whose schemas use what JSON Schema offers beyond plain types. */
const SHAPES: Tool[] = [
  {
    name: "create-order",
    description: 'Creates an order. Quotes """ and a backslash \\ stay inside the docstring.',
    inputSchema: {
      type: "object",
      $defs: {
        Address: {
          type: "object",
          properties: { street: { type: "string" }, zip: { type: ["string", "null"] } },
          required: ["street"],
        },
        Node: {
          type: "object",
          properties: {
            value: { type: "integer" },
            children: { type: "array", items: { $ref: "#/$defs/Node" } },
          },
        },
      },
      properties: {
        shipTo: { $ref: "#/$defs/Address", description: "Where it goes" },
        lines: {
          type: "array",
          items: {
            type: "object",
            properties: { sku: { type: "string" }, qty: { type: "integer", minimum: 1 } },
            required: ["sku", "qty"],
          },
        },
        priority: { enum: ["low", "high"], default: "low" },
        payment: {
          oneOf: [
            { type: "object", properties: { card: { type: "string" } }, required: ["card"] },
            { type: "object", properties: { iban: { type: "string" } }, required: ["iban"] },
          ],
        },
        note: { type: "string", nullable: true },
        tree: { $ref: "#/$defs/Node" },
        tags: { type: "object", additionalProperties: { type: "string" } },
        extra: { type: "object", properties: { a: { type: "string" } }, additionalProperties: true },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] },
        both: { type: "string", anyOf: [{ minLength: 1 }, { pattern: "^x" }] },
        mixed: { type: "object", anyOf: [{ type: "string" }] },
        "odd-name": { type: "integer" },
        from: { type: "string" },
      },
      required: ["shipTo", "lines"],
    },
    outputSchema: {
      type: "object",
      properties: { id: { type: "string" }, total: { type: "number" } },
      required: ["id"],
    },
  },
  { name: "class", description: "A tool whose Python name is a keyword", inputSchema: { type: "object" } },
  { name: "no_args", inputSchema: { type: "object", properties: {} } },
];

function python(program: string, input = ""): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync("python3", ["-I", "-c", program], { input, encoding: "utf8", maxBuffer: 1 << 28 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Writes modules as a stub package `mcp.servers` plus `check.py` using them; runs mypy --strict on it all. */
function mypy(modules: Record<string, string>, use: string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "codemode-stubs-"));
  mkdirSync(join(dir, "mcp", "servers"), { recursive: true });
  writeFileSync(join(dir, "mcp", "__init__.pyi"), "from . import servers as servers\n");
  writeFileSync(
    join(dir, "mcp", "servers", "__init__.pyi"),
    Object.keys(modules).map((m) => `from . import ${m} as ${m}\n`).join(""),
  );
  for (const [name, text] of Object.entries(modules)) {
    writeFileSync(join(dir, "mcp", "servers", `${name}.pyi`), text);
  }
  writeFileSync(join(dir, "check.py"), use);
  const run = spawnSync(MYPY, [
    "--strict",
    "--no-incremental",
    "--cache-dir",
    join(dir, ".cache"),
    "mcp",
    "check.py",
  ], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, MYPYPATH: dir },
  });
  return { status: run.status, output: run.stdout + run.stderr };
}

Deno.test("the stubs of the reference servers and of rich schemas are valid Python", () => {
  const texts = [
    ...["everything", "filesystem", "memory"].map((name) => serverStub(name, catalog(name).tools)),
    serverStub("shapes", SHAPES),
  ];
  const run = python(
    "import ast, json, sys\nfor text in json.load(sys.stdin):\n    ast.parse(text)\nprint('ok')",
    JSON.stringify(texts),
  );
  assert.equal(run.status, 0, run.stderr);
});

Deno.test({
  name: "Debian's mypy --strict accepts the stubs, and uses them to catch a misspelt argument",
  ignore: !existsSync(MYPY),
  fn() {
    const modules = {
      everything: serverStub("everything", catalog("everything").tools),
      filesystem: serverStub("filesystem", catalog("filesystem").tools),
      memory: serverStub("memory", catalog("memory").tools),
      shapes: serverStub("shapes", SHAPES),
    };
    const good = `import mcp.servers.filesystem as mcp_filesystem
import mcp.servers.memory as mcp_memory
import mcp.servers.shapes as mcp_shapes
async def main() -> None:
    text = await mcp_filesystem.read_text_file(path="/tmp/a", head=3)
    print(text["content"])
    await mcp_memory.create_entities(entities=[{"name": "a", "entityType": "t", "observations": []}])
    order = await mcp_shapes.create_order(shipTo={"street": "Main St", "zip": None}, lines=[{"sku": "x", "qty": 2}],
                                          priority="high", payment={"iban": "NO93"}, note=None)
    print(order["id"], order.get("total"))
`;
    const ok = mypy(modules, good);
    assert.equal(ok.status, 0, ok.output);
    const bad = mypy(
      modules,
      good.replace('content="x"', "").replace('path="/tmp/a", head=3', 'path="/tmp/a", hed=3'),
    );
    assert.equal(bad.status, 1);
    assert.match(bad.output, /Unexpected keyword argument "hed" for "read_text_file"; did you mean "head"\?/);
  },
});

Deno.test("JSON Schema becomes Python types: refs, unions, enums, nested objects, nullable, defaults", () => {
  const { text, signature } = toolStub(SHAPES[0]);
  const params = Object.fromEntries(
    signature.params.map((p) => [p.name, `${p.type}${p.required ? "" : ` = ${p.default}`}`]),
  );
  assert.deepEqual(params, {
    shipTo: "Address",
    lines: "list[CreateOrderLinesItem]",
    priority: 'Literal["low", "high"] = "low"',
    payment: "CreateOrderPayment1 | CreateOrderPayment2 = ...",
    note: "str | None = ...",
    tree: "Node = ...",
    tags: "dict[str, str] = ...",
    extra: "dict[str, Any] = ...",
    pair: "list[Any] = ...",
    both: "str = ...",
    mixed: "Any = ...",
  });
  assert.equal(signature.extra, true, "odd-name and from pass through **arguments");
  assert.equal(signature.returns, "CreateOrderResult");
  assert.match(text, /class Address\(TypedDict\):\n {4}street: str\n {4}zip: NotRequired\[str \| None\]/);
  assert.match(
    text,
    /class Node\(TypedDict\):\n {4}value: NotRequired\[int\]\n {4}children: NotRequired\[list\[Node\]\]/,
  );
  assert.match(text, /class CreateOrderResult\(TypedDict\):\n {4}id: str\n {4}total: NotRequired\[float\]/);
  assert.match(text, /odd-name: pass as \*\*\{"odd-name": \.\.\.\} \(int\)/);
  assert.match(text, /Quotes \\"\\"\\" and a backslash \\\\ stay inside the docstring\./);
  assert.equal(
    signatureLine(SHAPES[2]),
    "no_args()",
  );
  assert.match(serverStub("s", SHAPES), /# class: its Python name class is a keyword; call it as getattr/);
  assert.equal(signatureLine({ name: "open", inputSchema: { type: "object" } }), "open(**arguments: Any)");
});

Deno.test("what cannot be said in Python is Any, never a narrower type", () => {
  const cases: [unknown, string][] = [
    [{}, "Any"],
    [true, "Any"],
    [{ type: "string", format: "date-time" }, "str"],
    [{ type: ["integer", "string"] }, "int | str"],
    [{ allOf: [{ type: "string" }, { type: "integer" }] }, "Any"],
    [{ not: { type: "string" } }, "Any"],
    [{ enum: [1.5, 2] }, "Any"],
    [{ enum: ["a", null] }, 'Literal["a"] | None'],
    [{ const: "x" }, 'Literal["x"]'],
    [{ type: "array", items: [{ type: "string" }] }, "list[Any]"],
    [{ type: "object", patternProperties: { "^x": { type: "string" } } }, "dict[str, Any]"],
    [{ anyOf: [{ type: "string" }, {}] }, "Any"],
    [{ $ref: "#/nowhere" }, "Any"],
    [{ type: "madeup" }, "Any"],
    [
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } },
      "dict[str, Any]",
    ],
  ];
  for (const [schema, expected] of cases) assert.equal(schemaType(schema), expected, JSON.stringify(schema));
});

Deno.test("hostile schemas are bounded: deep, wide, recursive, huge enums and odd texts", () => {
  let deep: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < 20_000; i++) deep = { type: "object", properties: { a: deep }, required: ["a"] };
  const wide = {
    type: "object",
    properties: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`p${i}`, { type: "string" }])),
  };
  const chain: Record<string, unknown> = { $defs: {} };
  for (let i = 0; i < 1000; i++) {
    (chain.$defs as Record<string, unknown>)[`D${i}`] = { $ref: `#/$defs/D${i + 1}` };
  }
  (chain.$defs as Record<string, unknown>).D1000 = { $ref: "#/$defs/D0" };
  const tools: Tool[] = [
    { name: "deep", inputSchema: { type: "object", properties: { x: deep } } as Tool["inputSchema"] },
    { name: "wide", inputSchema: wide as Tool["inputSchema"] },
    {
      name: "loop",
      inputSchema: {
        type: "object",
        properties: { x: { $ref: "#/$defs/D0" } },
        ...chain,
      } as Tool["inputSchema"],
    },
    {
      name: "enum",
      inputSchema: {
        type: "object",
        properties: { e: { enum: Array.from({ length: 100_000 }, (_, i) => `v${i}`) } },
      },
    },
    {
      name: 'evil"""\u001b[2J\u0000',
      description: '"""\nimport os\n"""\u001b]52;c;AAAA\u0007\u009b\ud800 end"',
      inputSchema: {
        type: "object",
        properties: { 'k"""': { type: "string", description: "\u001b[8m hidden\n# not a comment" } },
      },
    },
    { name: "garbage", inputSchema: "not a schema" as unknown as Tool["inputSchema"] },
    { name: "garbage2", inputSchema: [1, 2] as unknown as Tool["inputSchema"] },
  ];
  const started = performance.now();
  const text = serverStub("hostile", tools);
  const ms = performance.now() - started;
  assert.ok(ms < 5000, `took ${ms} ms`);
  assert.ok(text.length < STUB_LIMITS.moduleChars);
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(text, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, "no control characters");
  assert.match(
    text,
    /async def wide\(\*\*arguments: Any\) -> Any:|async def wide\(\*, .*\*\*arguments: Any\)/,
  );
  assert.match(text, /async def enum\(\*, e: str = \.\.\.\) -> Any:/, "a huge enum is its values' base type");
  const run = python("import ast, sys\nast.parse(sys.stdin.read())\nprint('ok')", text);
  assert.equal(run.status, 0, run.stderr);
});
