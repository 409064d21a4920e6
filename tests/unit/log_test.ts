import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  configureLog,
  currentLogScope,
  log,
  type LogLevel,
  type LogScope,
  setLogLevel,
  setLogSink,
  withLogScope,
} from "../../core/observe/log.ts";

/** Runs `fn` with log lines captured at `level` (read them with `lines()`), then restores the defaults. */
async function captured(
  level: LogLevel,
  fn: (lines: () => Record<string, unknown>[]) => Promise<void> | void,
) {
  const raw: string[] = [];
  setLogLevel(level);
  setLogSink((line) => raw.push(line));
  try {
    await fn(() => raw.map((line) => JSON.parse(line)));
  } finally {
    setLogLevel("warn");
    setLogSink((line) => process.stderr.write(line + "\n"));
  }
}

const tick = () => new Promise((r) => setTimeout(r, 1));

Deno.test("log lines are JSON with time, level, msg and the fields, and lines below the level are dropped", async () => {
  await captured("info", (lines) => {
    log.debug("hidden");
    log.info("shown", { server: "x", ms: 3 });
    assert.equal(lines().length, 1);
    const [line] = lines();
    assert.deepEqual(Object.keys(line), ["time", "level", "msg", "server", "ms"]);
    assert.equal(line.level, "info");
    assert.equal(line.msg, "shown");
    assert.ok(!Number.isNaN(Date.parse(String(line.time))));
  });
});

Deno.test("lines written inside a scope carry its request id, across awaits and timers", async () => {
  await captured("debug", async (lines) => {
    await withLogScope({ requestId: "r-1" }, async () => {
      log.info("at once");
      await tick();
      log.info("after an await");
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          log.info("in a timer");
          resolve();
        }, 1)
      );
    });
    log.info("outside");
    assert.deepEqual(lines().map((l) => [l.msg, l.requestId]), [
      ["at once", "r-1"],
      ["after an await", "r-1"],
      ["in a timer", "r-1"],
      ["outside", undefined],
    ]);
  });
});

Deno.test("concurrent scopes keep their own request ids", async () => {
  await captured("debug", async (lines) => {
    await Promise.all(["a", "b"].map((id) =>
      withLogScope({ requestId: id }, async () => {
        for (let i = 0; i < 3; i++) {
          await tick();
          log.debug("step", { id });
        }
      })
    ));
    assert.equal(lines().length, 6);
    assert.ok(lines().every((l) => l.requestId === l.id));
  });
});

Deno.test("a scope's listener hears lines below the threshold; an ended scope claims nothing", async () => {
  await captured("error", async (lines) => {
    const heard: string[] = [];
    const scope: LogScope = { requestId: "r-2", listener: (level, msg) => heard.push(`${level}:${msg}`) };
    let later!: () => void;
    await withLogScope(scope, () => {
      log.debug("quiet detail");
      later = () => log.error("noticed after the request ended");
      assert.equal(currentLogScope(), scope);
    });
    scope.ended = true;
    later();
    assert.deepEqual(heard, ["debug:quiet detail"]);
    assert.deepEqual(lines().map((l) => [l.msg, l.requestId]), [[
      "noticed after the request ended",
      undefined,
    ]]);
  });
});

Deno.test("a listener that throws does not break the code that logs", async () => {
  await captured("info", (lines) => {
    withLogScope({
      listener: () => {
        throw new Error("boom");
      },
    }, () => log.info("still written"));
    assert.equal(lines().length, 1);
  });
});

Deno.test("log.enabled() says whether a line would go anywhere", async () => {
  await captured("warn", () => {
    assert.equal(log.enabled("debug"), false);
    assert.equal(log.enabled("error"), true);
    withLogScope({ listener: () => {} }, () => assert.equal(log.enabled("debug"), true));
  });
});

Deno.test("configureLog() with a file appends lines there, creating its folder", () => {
  const file = join(mkdtempSync(join(tmpdir(), "codemode-log-")), "nested", "codemode.log");
  try {
    configureLog({ level: "info", file });
    log.info("first", { n: 1 });
    log.debug("dropped");
    log.warn("second");
    const lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => [l.level, l.msg]), [["info", "first"], ["warn", "second"]]);
  } finally {
    configureLog({ level: "warn" });
  }
});

Deno.test("configureLog() falls back to stderr when the file cannot be opened", () => {
  const blocker = join(mkdtempSync(join(tmpdir(), "codemode-log-")), "file");
  Deno.writeTextFileSync(blocker, "");
  const written: string[] = [];
  const original = process.stderr.write.bind(process.stderr);
  process.stderr.write =
    ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
  try {
    configureLog({ level: "warn", file: join(blocker, "under-a-file.log") });
    log.warn("after the fallback");
  } finally {
    process.stderr.write = original;
    configureLog({ level: "warn" });
  }
  const lines = written.join("").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(lines[0].msg, "cannot open the log file; logging to stderr");
  assert.equal(lines[1].msg, "after the fallback");
});
