/**
 * The program the locked-down `deno run` subprocess executes. Its main thread speaks the host <-> sandbox
 * frames on stdin/stdout and keeps time; Python (Pyodide) runs on a worker, so the main thread can interrupt
 * it at a timeout, watch memory and exit without its cooperation.
 *
 * Both functions (and the snapshot codec, _pyodide_sparse.ts) are written into one file with
 * `Function.prototype.toString` (see `hostProgram`), which keeps them working inside a compiled binary, so
 * they must not refer to anything outside themselves.
 *
 * Main thread -> worker: one init message, then every stdin line through a shared-memory mailbox (so Python
 * blocked in a synchronous call can still receive its answer). Worker -> main thread: each outgoing frame as
 * a string, `{fatal}` on a failure, or the snapshot bytes in snapshot mode.
 * @module
 */
import type { SnapshotRead, SparseSnapshotCodec } from "./_pyodide_sparse.ts";

/** What the subprocess gets as its only argument (JSON). */
export interface HostConfig {
  /**
   * "serve" runs sessions; "snapshot" writes a start-up memory snapshot to stdout and exits (with a
   * `bootstrap`, after importing the runtime from the bootstrap frame, its first stdin line).
   */
  mode: "serve" | "snapshot";
  /** Directory of the Pyodide distribution, with a trailing separator. */
  assets: string;
  /** A memory snapshot to start from, made earlier in snapshot mode (codemode's sparse layout). */
  snapshot?: string;
  /** Bytes the sandboxed code may allocate on top of the runtime's own footprint. */
  memoryBytes: number;
  /** Source of the sandbox bootstrap (its `install()` puts the runtime modules on sys.meta_path). */
  bootstrap?: string;
}

/** Entry point of the subprocess's main thread. */
export async function pyodideHostMain(
  workerMain: (sparseCodec: () => SparseSnapshotCodec) => void,
  glue: string,
  sparseCodec: () => SparseSnapshotCodec,
): Promise<void> {
  const config = JSON.parse(Deno.args[0]) as HostConfig;
  // Mailbox layout (Int32 slots): interrupt flag (Pyodide's interrupt buffer), mailbox state
  // (0 empty, 1 full), chunk length, more-chunks flag. The data area follows.
  const INTERRUPT = 0, STATE = 1, LENGTH = 2, MORE = 3, CHUNK = 1 << 20, SIGINT = 2;
  const MEMORY_SLACK = 128 * 1024 * 1024;
  const sab = new SharedArrayBuffer(16 + CHUNK);
  const ctrl = new Int32Array(sab, 0, 4);
  const data = new Uint8Array(sab, 16);
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  const writeAll = (bytes: Uint8Array) => {
    for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
  };
  // 137 for the memory limit, as for a container the kernel's OOM killer stopped; 70 for other failures.
  const fail = (message: string, code = 70): never => {
    try {
      Deno.stderr.writeSync(encoder.encode(`codemode pyodide: ${message}\n`));
    } finally {
      Deno.exit(code);
    }
    throw new Error(message);
  };

  // Pyodide's wasm compiles here while the worker starts and imports Pyodide's JavaScript: the worker
  // instantiates the compiled module (see the worker's instantiate) instead of compiling it after that.
  const compiled = new MessageChannel();
  Deno.readFile(config.assets + "pyodide.asm.wasm").then((bytes) => WebAssembly.compile(bytes)).then(
    (module) => compiled.port1.postMessage(module),
    () => compiled.port1.postMessage(null), // the worker compiles it itself and reports what is wrong
  );

  const source = `(${workerMain})(${sparseCodec})`;
  const worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })), {
    type: "module",
  });
  worker.onerror = (event) => {
    event.preventDefault();
    fail(`the Python worker failed: ${event.message}`);
  };

  /** The run's timer; `left` is set while the host waits for a person (between pause and resume). */
  let armed: { id: unknown; timer: ReturnType<typeof setTimeout>; endsAt: number; left?: number } | undefined;
  let memoryCap = Infinity;
  const disarm = () => {
    if (armed) clearTimeout(armed.timer);
    armed = undefined;
    Atomics.store(ctrl, INTERRUPT, 0);
  };
  const pauseOrResume = (run: NonNullable<typeof armed>, pause: boolean) => {
    if (pause && run.left === undefined) {
      clearTimeout(run.timer);
      run.left = Math.max(0, run.endsAt - performance.now());
    } else if (!pause && run.left !== undefined) {
      run.endsAt = performance.now() + run.left;
      run.timer = setTimeout(interrupt, run.left);
      run.left = undefined;
    }
  };
  const interrupt = () => {
    Atomics.store(ctrl, INTERRUPT, SIGINT);
    Atomics.notify(ctrl, INTERRUPT);
    Atomics.notify(ctrl, STATE);
  };

  worker.onmessage = (event: MessageEvent) => {
    const message = event.data;
    if (typeof message === "string") {
      writeAll(encoder.encode(message + "\n"));
      const head = message.slice(0, 40);
      if (armed && /^\{"type":\s*"done"/.test(head)) {
        try {
          if (JSON.parse(message).id === armed.id) disarm();
        } catch { /* not a frame the worker should send; the host drops it */ }
      } else if (/^\{"type":\s*"ready"/.test(head) && memoryCap === Infinity) {
        memoryCap = Deno.memoryUsage().rss + config.memoryBytes + MEMORY_SLACK;
      }
    } else if (message instanceof Uint8Array && config.mode === "snapshot") {
      writeAll(message);
      Deno.exit(0);
    } else if (message && typeof message === "object" && typeof message.fatal === "string") {
      fail(message.fatal);
    }
  };
  worker.postMessage({ ...config, sab, glue, compiled: compiled.port2 }, [compiled.port2]);

  // The whole process's memory: what the Python heap cap can't see (JS objects, array buffers).
  if (config.mode === "serve") {
    setInterval(() => {
      const rss = Deno.memoryUsage().rss;
      if (rss > memoryCap) {
        fail(`the sandbox used ${Math.round(rss / 2 ** 20)} MiB, over its memory limit; it was stopped`, 137);
      }
    }, 100);
  }

  // Lines go to the worker in chunks of at most CHUNK bytes, one chunk in the mailbox at a time.
  const pending: { chunk: Uint8Array; more: number }[] = [];
  let pumping = false;
  const pump = async () => {
    if (pumping) return;
    pumping = true;
    while (pending.length > 0) {
      if (Atomics.load(ctrl, STATE) !== 0) {
        const wait = Atomics.waitAsync(ctrl, STATE, 1);
        if (wait.async) await wait.value;
        continue;
      }
      const { chunk, more } = pending.shift()!;
      data.set(chunk);
      Atomics.store(ctrl, LENGTH, chunk.length);
      Atomics.store(ctrl, MORE, more);
      Atomics.store(ctrl, STATE, 1);
      Atomics.notify(ctrl, STATE);
    }
    pumping = false;
  };
  const deliver = (line: Uint8Array) => {
    const head = decoder.decode(line.subarray(0, 40));
    if (/^\{"type":\s*"shutdown"/.test(head)) Deno.exit(0);
    // The host's cancel: the same interrupt a timeout sends, for the armed run only.
    if (/^\{"type":\s*"interrupt"/.test(head)) {
      try {
        if (armed && JSON.parse(decoder.decode(line)).id === armed.id) interrupt();
      } catch { /* not a frame the host sends */ }
      return;
    }
    if (/^\{"type":\s*"execute"/.test(head)) {
      disarm();
      try {
        const frame = JSON.parse(decoder.decode(line));
        const seconds = Number(frame.timeout) > 0 ? Number(frame.timeout) : 30;
        // A little after the worker's own timer, which stops runs that are waiting rather than computing.
        const ms = seconds * 1000 + 100;
        armed = { id: frame.id, timer: setTimeout(interrupt, ms), endsAt: performance.now() + ms };
      } catch { /* the worker reports the bad frame */ }
    }
    // Waiting for a person stops this timer too; the worker gets the frame as well, for its own.
    if (/^\{"type":\s*"(pause|resume)"/.test(head)) {
      try {
        const frame = JSON.parse(decoder.decode(line));
        if (armed && frame.id === armed.id) pauseOrResume(armed, frame.type === "pause");
      } catch { /* not a frame the host sends */ }
    }
    for (let at = 0; at < line.length; at += CHUNK) {
      pending.push({ chunk: line.subarray(at, at + CHUNK), more: at + CHUNK < line.length ? 1 : 0 });
    }
    void pump();
  };

  let buffered: Uint8Array[] = [];
  for await (const chunk of Deno.stdin.readable) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      buffered.push(chunk.subarray(start, nl));
      const size = buffered.reduce((sum, part) => sum + part.length, 0);
      const line = new Uint8Array(size);
      let offset = 0;
      for (const part of buffered) {
        line.set(part, offset);
        offset += part.length;
      }
      buffered = [];
      start = nl + 1;
      if (line.length > 0) deliver(line);
    }
    if (start < chunk.length) buffered.push(chunk.slice(start));
  }
  // In snapshot mode stdin only carries the bootstrap frame: the snapshot posted back ends the process.
  if (config.mode === "serve") Deno.exit(0);
}

/** Entry point of the worker that runs Pyodide. */
export function pyodideWorkerMain(sparseCodec: () => SparseSnapshotCodec): void {
  // deno-lint-ignore no-explicit-any
  const scope = globalThis as any;
  const post = (message: unknown, transfer: Transferable[] = []) => scope.postMessage(message, transfer);
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const stderr = (text: string) => Deno.stderr.writeSync(encoder.encode(text + "\n"));
  // stdout carries the protocol: nothing in here may print to it by accident.
  for (const name of ["log", "info", "debug", "warn", "error", "trace", "dir", "table"]) {
    scope.console[name] = (...args: unknown[]) => {
      const text = args.map(String).join(" ");
      stderr(text);
      // The interpreter is unusable after this (os.system is one way there): end now, not at the timeout.
      if (text.startsWith("Pyodide has suffered a fatal error")) post({ fatal: text });
    };
  }
  scope.addEventListener("unhandledrejection", (event: PromiseRejectionEvent) => {
    event.preventDefault();
    stderr(`unhandled rejection in the Python worker: ${String(event.reason).slice(-2000)}`);
  });
  scope.addEventListener("error", (event: ErrorEvent) => {
    event.preventDefault();
    stderr(`uncaught error in the Python worker: ${event.message}`);
  });

  // The glue (pyodide_glue.ts) runs once as module codemode_pyodide: in a restored snapshot it is there.
  const GLUE_LOADER = [
    "import sys, types",
    "if 'codemode_pyodide' not in sys.modules:",
    "    module = types.ModuleType('codemode_pyodide')",
    "    exec(compile(GLUE, '<codemode>/pyodide_glue.py', 'exec', dont_inherit=True), module.__dict__)",
    "    sys.modules['codemode_pyodide'] = module",
    "sys.modules['codemode_pyodide']",
  ].join("\n");

  scope.onmessage = async (event: MessageEvent) => {
    scope.onmessage = null;
    const config = event.data;
    const INTERRUPT = 0, STATE = 1, LENGTH = 2, MORE = 3;
    const ctrl = new Int32Array(config.sab, 0, 4);
    const data = new Uint8Array(config.sab, 16);
    try {
      // Caps the Python heap (wasm memory): past it, malloc fails and Python raises MemoryError.
      let heapCap = Infinity;
      let memory: WebAssembly.Memory | undefined;
      const wasm = scope.WebAssembly;
      const port: MessagePort = config.compiled;
      const precompiled = new Promise<WebAssembly.Module | null>((resolve) => {
        port.onmessage = (message) => {
          port.close();
          resolve(message.data);
        };
      });
      const pyodideWasm = (source: unknown) =>
        (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) && source.byteLength > 1 << 20;
      for (const name of ["instantiate", "instantiateStreaming"]) {
        const original = wasm[name];
        wasm[name] = async (
          source: unknown,
          imports: { env?: Record<string, unknown> },
          ...rest: unknown[]
        ) => {
          const grow = imports?.env?.emscripten_resize_heap;
          if (typeof grow === "function") {
            imports.env!.emscripten_resize_heap = (size: number) => (size >>> 0) > heapCap ? 0 : grow(size);
          }
          const module = name === "instantiate" && pyodideWasm(source) ? await precompiled : null;
          const result = module
            ? { module, instance: await original.call(wasm, module, imports) }
            : await original.call(wasm, source, imports, ...rest);
          const exported = (result.instance ?? result).exports?.memory;
          if (!memory && exported instanceof WebAssembly.Memory) memory = exported;
          return result;
        };
      }
      // No threads for sandboxed code, as a container's pids limit would have it.
      delete scope.Worker;

      const assetUrl = (name: string) => new URL(name, "file://" + config.assets).href;
      const [{ loadPyodide }, { default: createPyodideModule }] = await Promise.all([
        import(assetUrl("pyodide.mjs")),
        import(assetUrl("pyodide.asm.mjs")),
      ]);
      const snapshotMode = config.mode === "snapshot";
      const options = { indexURL: config.assets, env: { HOME: "/home/pyodide" }, stdout: stderr, stderr };

      // The snapshot, in codemode's sparse layout (_pyodide_sparse.ts): its non-zero pages go from the
      // file straight into the heap, through a hook on Pyodide's restore that gets the header only.
      const codec = sparseCodec();
      const restoring = (read: SnapshotRead, recordClears = false) => {
        const opened = codec.open(read);
        const state = { restored: false, clears: new Uint32Array() as Uint32Array };
        const createModule = async (settings: unknown) => {
          // deno-lint-ignore no-explicit-any
          const module: any = await createPyodideModule(settings);
          const restore = module.API.restoreSnapshot;
          module.API.restoreSnapshot = (snapshot: Uint8Array) => {
            state.clears = opened.fill(
              new Uint8Array(module.HEAP8.buffer, 0, opened.heapLength),
              recordClears,
            );
            state.restored = true;
            return restore(snapshot.subarray(0, opened.headerLength));
          };
          return module;
        };
        return { options: { _loadSnapshot: opened.image, createPyodideModule: createModule }, state };
      };
      const importGlue = (
        py: { runPython: (code: string, options?: unknown) => unknown; toPy: (v: unknown) => unknown },
      ) =>
        // deno-lint-ignore no-explicit-any
        py.runPython(GLUE_LOADER, { globals: py.toPy({ GLUE: config.glue }) }) as any;

      let parts: Uint8Array[] = [];
      const take = (): string | null => {
        while (Atomics.load(ctrl, STATE) === 1) {
          const length = Atomics.load(ctrl, LENGTH), more = Atomics.load(ctrl, MORE);
          parts.push(data.slice(0, length));
          Atomics.store(ctrl, STATE, 0);
          Atomics.notify(ctrl, STATE);
          if (more) continue;
          let whole = parts[0];
          if (parts.length > 1) {
            whole = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
            let offset = 0;
            for (const part of parts) {
              whole.set(part, offset);
              offset += part.length;
            }
          }
          parts = [];
          return decoder.decode(whole);
        }
        return null;
      };
      const receiveAsync = async (): Promise<string> => {
        for (;;) {
          const line = take();
          if (line !== null) return line;
          const wait = Atomics.waitAsync(ctrl, STATE, 0);
          if (wait.async) await wait.value;
        }
      };
      const snapshot = config.snapshot ? restoring(codec.fileReader(config.snapshot)) : undefined;
      const pyodide = await loadPyodide({
        ...options,
        ...(snapshot?.options ?? {}),
        _makeSnapshot: snapshotMode || undefined,
      });
      if (snapshot && !snapshot.state.restored) throw new Error("this Pyodide did not restore the snapshot");
      if (snapshotMode) {
        // With a bootstrap, the runtime is imported before the image is taken (the first stdin line is
        // the bootstrap frame), so sessions restored from it start without compiling it.
        if (config.bootstrap !== undefined) {
          importGlue(pyodide).preload(await receiveAsync(), config.bootstrap);
        }
        const image = pyodide.makeMemorySnapshot();
        // Snapshots are a private Pyodide API: one that doesn't restore is never handed out. The check
        // restores it as a session would, recording the pages a fresh module wrote that must be cleared.
        const check = restoring(codec.memoryReader(codec.encode(image)), true);
        const restored = await loadPyodide({ ...options, ...check.options });
        const ok = check.state.restored && restored.runPython("sum(range(10))") === 45 &&
          (config.bootstrap === undefined || importGlue(restored).preloaded_ok());
        if (!ok) throw new Error("the snapshot does not restore");
        const made = codec.encode(image, check.state.clears);
        post(made, [made.buffer as ArrayBuffer]);
        return;
      }
      pyodide.setStdin({ stdin: () => null }); // end of file, as /dev/null gives a container
      pyodide.setInterruptBuffer(new Int32Array(config.sab, 0, 1));

      const interrupted = () => Atomics.exchange(ctrl, INTERRUPT, 0) !== 0;
      // Writes to fds 1 and 2 arrive here with the GIL released, so Python can't be called: they wait,
      // capped, until the transport drains them (before each print and at the end of a run).
      const FD_CAP = 16 * 1024 * 1024;
      const fds: Record<string, { chunks: Uint8Array[]; size: number; dropped: number }> = {
        stdout: { chunks: [], size: 0, dropped: 0 },
        stderr: { chunks: [], size: 0, dropped: 0 },
      };
      const fdWriter = (name: string) => ({
        write: (buffer: Uint8Array) => {
          const fd = fds[name];
          const kept = buffer.subarray(0, Math.max(0, FD_CAP - fd.size));
          if (kept.length > 0) fd.chunks.push(kept.slice());
          fd.size += kept.length;
          fd.dropped += buffer.length - kept.length;
          return buffer.length;
        },
      });
      const host = {
        send: (line: string) => post(line.endsWith("\n") ? line.slice(0, -1) : line),
        /** Waits up to `ms` for the next line; undefined (None in Python) on timeout or interrupt. */
        receive: (ms: number): string | undefined => {
          const deadline = performance.now() + ms;
          for (;;) {
            const line = take();
            if (line !== null) return line;
            const left = deadline - performance.now();
            if (left <= 0 || Atomics.load(ctrl, INTERRUPT) !== 0) return undefined;
            Atomics.wait(ctrl, STATE, 0, left);
          }
        },
        /** Sleeps up to `ms`; true (and the flag cleared) when interrupted. */
        wait: (ms: number): boolean => {
          Atomics.wait(ctrl, INTERRUPT, 0, ms);
          return interrupted();
        },
        interrupted,
        /** Output written to an fd since the last call, and how many bytes of it were dropped. */
        drain: (name: string) => {
          const fd = fds[name];
          if (fd.size === 0 && fd.dropped === 0) return undefined;
          const bytes = new Uint8Array(fd.size);
          let offset = 0;
          for (const chunk of fd.chunks) {
            bytes.set(chunk, offset);
            offset += chunk.length;
          }
          const result = { bytes, dropped: fd.dropped };
          fds[name] = { chunks: [], size: 0, dropped: 0 };
          return result;
        },
      };

      const bootstrap = await receiveAsync();
      const transport = importGlue(pyodide).start(bootstrap, config.bootstrap ?? "", host);
      pyodide.setStdout(fdWriter("stdout"));
      pyodide.setStderr(fdWriter("stderr"));
      if (memory) heapCap = memory.buffer.byteLength + config.memoryBytes;
      transport.announce();
      for (;;) {
        const line = await receiveAsync();
        try {
          transport.on_line(line);
        } catch (error) {
          stderr(`the Python transport rejected a frame: ${String(error).slice(-2000)}`);
        }
      }
    } catch (error) {
      post({ fatal: `Pyodide failed to start: ${String((error as Error)?.stack ?? error).slice(-4000)}` });
    }
  };
}
