/**
 * Escape attempts from Python in the pyodide runtime through every JavaScript bridge, shared by the
 * in-process suite (pyodide_escape_test.ts) and the compiled binary's (tests/e2e/standalone_test.ts).
 * Each must fail with the expected denial, and the session must keep working.
 * @module
 */

/** The prelude most attempts start with: `import js` and a helper that makes JS objects. */
export const JS =
  "import js\nfrom pyodide.ffi import to_js\nobj = lambda **kw: to_js(kw, dict_converter=js.Object.fromEntries)\n";

/** What the attempts aim at. */
export interface AttemptTargets {
  /** The state directory (its listing must be refused). */
  stateDir: string;
  /** A file only the host may read. */
  hostFile: string;
  /** A path the attempts try to create. */
  target: string;
  /** A TCP port on 127.0.0.1 with a listener counting connections. */
  port: number;
  /** An environment variable holding a secret. */
  secretName: string;
}

/** [what is tried, the code, what its failure must say] */
export function pyodideAttempts(where: AttemptTargets): [string, string, RegExp][] {
  const js = JS;
  return [
    [
      "read a file",
      `${js}js.Deno.readTextFileSync('/etc/passwd')`,
      /Requires read access to "\/etc\/passwd"/,
    ],
    [
      "read a file the test wrote",
      `${js}js.Deno.readTextFileSync('${where.hostFile}')`,
      /Requires read access/,
    ],
    ["list the root directory", `${js}js.Deno.readDirSync('/')`, /Requires read access to "\/"/],
    ["list the state directory", `${js}js.Deno.readDirSync('${where.stateDir}')`, /Requires read access/],
    ["read the environment", `${js}js.Deno.env.toObject()`, /Requires env access/],
    ["read the secret variable", `${js}js.Deno.env.get('${where.secretName}')`, /Requires env access/],
    [
      "read /proc/self/environ",
      `${js}js.Deno.readTextFileSync('/proc/self/environ')`,
      /Requires read access/,
    ],
    [
      "connect over TCP",
      `${js}await js.Deno.connect(obj(hostname='127.0.0.1', port=${where.port}))`,
      /Requires net access/,
    ],
    ["fetch over HTTP", `${js}await js.fetch('http://127.0.0.1:${where.port}/')`, /Requires net access/],
    ["open a WebSocket", `${js}js.WebSocket.new('ws://127.0.0.1:${where.port}/')`, /Requires net access/],
    ["run a program", `${js}js.Deno.Command.new('/usr/bin/id').outputSync()`, /Requires run access/],
    [
      "run a program from PATH",
      `${js}js.Deno.Command.new('id').outputSync()`,
      /Requires run access|no path to search/,
    ],
    ["signal the host", `${js}js.Deno.kill(js.Deno.ppid, 'SIGCONT')`, /Requires run access/],
    ["load a native library", `${js}js.Deno.dlopen('libc.so.6', obj())`, /Requires ffi access/],
    ["write a file", `${js}js.Deno.writeTextFileSync('${where.target}', 'pwned')`, /Requires write access/],
    ["make a temp file", `${js}js.Deno.makeTempFileSync()`, /Requires write access/],
    ["ask for the hostname", `${js}js.Deno.hostname()`, /Requires sys access/],
    ["eval JavaScript", `${js}js.eval("Deno.readTextFileSync('/etc/hostname')")`, /EvalError/],
    [
      "reach the Function constructor from a JsProxy",
      `${js}js.Math.constructor.constructor("return Deno.readTextFileSync('/etc/hostname')")()`,
      /EvalError: Code generation from strings disallowed/,
    ],
    [
      "reach it from Python introspection, without importing js",
      "s = next(c.__init__.__globals__['sys'] for c in (0).__class__.__base__.__subclasses__()\n" +
      "         if hasattr(c.__init__, '__globals__') and 'sys' in c.__init__.__globals__)\n" +
      "s.modules['pyodide_js'].constructor.constructor(\"return Deno.readTextFileSync('/etc/hostname')\")()",
      /EvalError/,
    ],
    ["import node:fs dynamically", `${js}await js.Function.new("return import('node:fs')")()`, /EvalError/],
    [
      "import node:child_process dynamically",
      `${js}js.Object.constructor.constructor("return import('node:child_process')")()`,
      /EvalError/,
    ],
    ["run JS through pyodide.code", "from pyodide.code import run_js\nrun_js('Deno.pid')", /EvalError/],
    [
      "run JS through emscripten",
      "import pyodide_js\nm = pyodide_js._module\nm._emscripten_run_script(m.stringToNewUTF8('Deno.pid'))",
      /EvalError/,
    ],
    [
      "mount a host directory",
      "import pyodide_js\npyodide_js.mountNodeFS('/mnt', '/etc')",
      /hostPath|Requires read/,
    ],
    [
      "load a host file as binary",
      "import pyodide_js\nawait pyodide_js._api.loadBinaryFile('/etc/passwd')",
      /Requires read/,
    ],
    ["open the Cache API", `${js}await js.caches.open('x')`, /cache storage|Not a directory/i],
    ["start a worker thread", `${js}js.Worker.new('data:text/javascript,1')`, /AttributeError: Worker/],
    ["start a process from Python", "import subprocess\nsubprocess.run(['id'])", /OSError/],
    ["call os.system", "import os\nos.system('id')", /OSError: .*no processes/],
    ["open a host file from Python", `open('${where.hostFile}').read()`, /FileNotFoundError/],
    [
      "read the Deno executable running the sandbox",
      `${js}js.Deno.readFileSync(js.Deno.execPath())`,
      /Requires read access/,
    ],
    [
      "overwrite a Pyodide file the sandbox loads",
      `${js}import pyodide_js\n` +
      "js.Deno.writeTextFileSync(pyodide_js._api.config.indexURL + 'pyodide.asm.mjs', 'x')",
      /Requires write access/,
    ],
  ];
}
