/**
 * `/healthz` and `/metrics` of a real `serve --http` and of `codemode ui`, read with a Prometheus text
 * parser: the exposition parses, every codemode metric the docs name is there next to prom-client's
 * process metrics, and counters move by exactly the runs and tool calls made. `codemode stats` reads
 * the same counters. Real podman sandboxes, real server-everything.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import parsePrometheus from "parse-prometheus-text-format";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { fakeHome, ROOT, serve } from "./_serve.ts";
import { connectHttp, startHttpServe } from "./_serve_http.ts";
import { startUi } from "./_browser.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED metrics suite: podman or image ${TEST_IMAGE} missing`);

const TOKEN = "metrics-token-93d1c0";
const NAMES = [
  "codemode_runs_total",
  "codemode_run_duration_seconds",
  "codemode_tool_calls_total",
  "codemode_tool_call_duration_seconds",
  "codemode_sandboxes",
  "codemode_sandboxes_started_total",
  "codemode_sandbox_exits_total",
  "codemode_upstream_restarts_total",
  "codemode_approvals_total",
];

interface Family {
  name: string;
  type: string;
  metrics: { value?: string; count?: string; sum?: string; labels?: Record<string, string> }[];
}

/** Parses an exposition; the parser throws on text that is not the Prometheus format. */
function parse(text: string): Map<string, Family> {
  return new Map((parsePrometheus(text) as Family[]).map((f) => [f.name, f]));
}

/** The sum of a family's values (or histogram counts) over the series whose labels include `labels`. */
function total(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name);
  if (!family) return 0;
  return family.metrics
    .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
    .reduce((n, m) => n + Number(m.value ?? m.count ?? 0), 0);
}

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

test("serve --http: /healthz needs no token and says nothing private; /metrics needs it and counts exactly", async () => {
  const http = await startHttpServe(fakeHome(), {
    CODEMODE_RUNTIME: "podman",
    CODEMODE_HTTP_TOKEN: TOKEN,
    CODEMODE_NODE_ID: "metrics-node",
  });
  const base = http.url.replace(/mcp$/, "");
  const auth = { authorization: `Bearer ${TOKEN}` };
  try {
    const health = await fetch(base + "healthz");
    assert.equal(health.status, 200);
    const body = await health.json();
    assert.deepEqual(Object.keys(body).sort(), [
      "node",
      "runtime",
      "serversUp",
      "sessions",
      "status",
      "uptimeSeconds",
      "version",
    ]);
    assert.equal(body.status, "ok");
    assert.equal(body.node, "metrics-node");
    assert.equal(typeof body.uptimeSeconds, "number");
    const refused = await fetch(base + "metrics");
    assert.equal(refused.status, 401);
    await refused.body?.cancel();

    const client = await connectHttp(http.url, auth);
    await client.run("print('warm up')");
    const beforeText = await (await fetch(base + "metrics", { headers: auth })).text();
    const before = parse(beforeText);
    for (const name of NAMES) assert.ok(before.has(name), `${name} is exposed`);
    assert.equal(before.get("codemode_run_duration_seconds")!.type, "HISTOGRAM");
    assert.equal(before.get("codemode_sandboxes")!.type, "GAUGE");
    assert.ok(before.has("process_cpu_user_seconds_total"), "prom-client's default process metrics");
    assert.ok(before.has("process_resident_memory_bytes"));
    assert.match(beforeText, /^codemode_node_info\{node="metrics-node"\} 1$/m, "the node id as a label");
    assert.match(beforeText, /^codemode_node_ready\{node="metrics-node"\} 1$/m);

    const runs = 4;
    for (let i = 0; i < runs; i++) {
      const r = await client.run(`for n in range(2):\n    await mcp_everything.echo(message=f"{n}")\n${i}`);
      assert.equal(r.isError, false, r.text);
    }
    const failed = await client.run("raise RuntimeError('counted as an error')");
    assert.equal(failed.isError, true);
    const afterText = await (await fetch(base + "metrics", { headers: auth })).text();
    const after = parse(afterText);
    const delta = (name: string, labels?: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);
    assert.equal(delta("codemode_runs_total", { outcome: "ok" }), runs);
    assert.equal(delta("codemode_runs_total", { outcome: "error" }), 1);
    assert.equal(delta("codemode_runs_total"), runs + 1);
    assert.equal(delta("codemode_run_duration_seconds"), runs + 1);
    const echo = { server: "everything", tool: "echo" };
    assert.equal(delta("codemode_tool_calls_total", { ...echo, outcome: "ok" }), 2 * runs);
    // The parser folds a labelled histogram into one unlabelled series, so its _count lines are read as text.
    const count = (text: string) =>
      Number(
        /^codemode_tool_call_duration_seconds_count\{server="everything",tool="echo"\} (\d+)$/m.exec(text)
          ?.[1] ?? 0,
      );
    assert.equal(count(afterText) - count(beforeText), 2 * runs);
    assert.equal(total(after, "codemode_sandboxes"), 1, "one live sandbox: this client's");
    assert.equal(total(after, "codemode_sandboxes_started_total"), 1);
    await client.end();
  } finally {
    await http.stop();
  }
});

test("codemode ui adds up the metrics every serve publishes, and codemode stats reads the same counters", async () => {
  const home = fakeHome();
  const env = { CODEMODE_RUNTIME: "podman" };
  const a = await serve(env, home);
  const b = await serve(env, home);
  const ui = await startUi(home, { CODEMODE_HTTP_TOKEN: TOKEN });
  try {
    const auth = { authorization: `Bearer ${TOKEN}` };
    await a.run("await mcp_everything.echo(message='a')");
    await b.run("await mcp_everything.echo(message='b1')\nawait mcp_everything.echo(message='b2')");
    await b.run("print(2)");
    // Each serve publishes its state every half second.
    let families = new Map<string, Family>();
    for (let i = 0; i < 40 && total(families, "codemode_runs_total") < 3; i++) {
      await new Promise((r) => setTimeout(r, 250));
      families = parse(await (await fetch(ui.url + "metrics", { headers: auth })).text());
    }
    assert.equal(total(families, "codemode_runs_total", { outcome: "ok" }), 3);
    assert.equal(total(families, "codemode_tool_calls_total", { tool: "echo", outcome: "ok" }), 3);
    assert.equal(total(families, "codemode_sandboxes"), 2);
    assert.ok(families.has("process_cpu_user_seconds_total"), "the ui's own process metrics");
    const health = await (await fetch(ui.url + "healthz")).json();
    assert.equal(health.serves, 2);
    assert.equal(health.sessions, 2);
    // Each serve rewrites its stats file at most once a second: read until both have caught up.
    const statsJson = () =>
      new Promise<string>((resolve, reject) =>
        execFile(
          join(ROOT, "node_modules/.bin/deno"),
          ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "stats", "--json"],
          {
            cwd: home,
            env: { PATH: process.env.PATH ?? "", HOME: home, CODEMODE_STATE_DIR: join(home, "state") },
          },
          (error, stdout) => (error ? reject(error) : resolve(stdout)),
        )
      );
    let snapshots: { runs: { total: number; ok: number }; upstream: { count: number }[] }[] = [];
    for (let i = 0; i < 20; i++) {
      snapshots = JSON.parse(await statsJson());
      if (snapshots.reduce((n, s) => n + s.runs.ok, 0) === 3) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.deepEqual(snapshots.map((s) => s.runs.ok).sort(), [1, 2]);
    assert.equal(snapshots.reduce((n, s) => n + s.upstream.reduce((m, u) => m + u.count, 0), 0), 3);
  } finally {
    await ui.stop();
    await Promise.all([a.close(), b.close()]);
  }
});
