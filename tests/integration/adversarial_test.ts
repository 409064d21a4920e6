/**
 * The adversarial suite: more than fifty named escape and abuse attempts by sandbox code (network,
 * filesystem, privileges, resources, protocol forgery, secrets of MCP servers, the host environment,
 * artifacts, mounts, skills, approvals, servers added from a registry, and trace context), each run
 * through a real `codemode serve` over stdio with the SDK client, on every container engine that is set
 * up, exporting traces to a collector of the suite's own. After each attempt: the call was answered within
 * a bound, the server still runs code. At the end: no container of that serve process is left, and no
 * secret appeared in any answer or reached the collector. Then the dashboard's attacks
 * (_attempts_dashboard.ts): other origins, other Hosts, stolen codes and cookies, files planted by another
 * local user, traversal in run image and artifact names, other sessions' artifacts, script in displays,
 * forged answers to a pending approval.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type Attempt, type Ctx, type Fixtures, fixtures, prelude } from "./_adversarial.ts";
import { filesystem, network, privileges } from "./_attempts_escape.ts";
import { hostEnv, protocol, resources, secrets } from "./_attempts_abuse.ts";
import { displays } from "./_attempts_display.ts";
import { artifacts, mounts, mountSetting } from "./_attempts_files.ts";
import { plantSkills, skills } from "./_attempts_skills.ts";
import { approvals } from "./_attempts_approvals.ts";
import { registry as registryAttempts } from "./_attempts_registry.ts";
import { startRegistry, type TestRegistry } from "./_registry.ts";
import { askingClient, reply } from "./_approvals.ts";
import { oauthTokens } from "./_attempts_oauth.ts";
import { tracing } from "./_attempts_trace.ts";
import {
  type Answer,
  assertNoSandboxOf,
  assertStillServing,
  fakeHome,
  ROOT,
  runWithin,
  sandboxesOf,
  serve,
  type Served,
} from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";
import {
  dashboardAttacks,
  type DashboardCtx,
  dashboardFileAttacks,
  otherLocalUser,
  send,
} from "./_attempts_dashboard.ts";
import { startUi } from "./_browser.ts";

const ATTEMPTS: Attempt[] = [
  ...network,
  ...filesystem,
  ...privileges,
  ...resources,
  ...protocol,
  ...secrets,
  ...oauthTokens,
  ...hostEnv,
  ...displays,
  ...artifacts,
  ...mounts,
  ...skills,
  ...approvals,
  ...registryAttempts,
  ...tracing,
];
/** How long past its own timeout a run may take to be answered (sandbox restarts, CPU contention). */
const SLACK_MS = 60_000;

Deno.test("the adversarial table has at least 30 distinct attempts", () => {
  const names = ATTEMPTS.map((a) => `${a.area}: ${a.name}`);
  assert.equal(new Set(names).size, names.length);
  assert.ok(names.length >= 30, `${names.length} attempts`);
});

const engines: [string, RuntimePlugin & ImageStore][] = [["podman", podman()], ["docker", docker()]];

for (const [engine, runtime] of engines) {
  const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
  if (!usable) console.warn(`IGNORED adversarial suite on ${engine}: engine or image ${TEST_IMAGE} missing`);

  let fix: Fixtures | undefined;
  let served: Served | undefined;
  let registry: TestRegistry | undefined;
  const answers: Answer[] = [];
  const context = async (): Promise<Ctx> => {
    fix ??= await fixtures({
      repoRoot: ROOT,
      deno: join(ROOT, "node_modules/.bin/deno"),
      faultyServer: join(ROOT, "tests/testdata/servers/faulty_server.ts"),
      notesServer: join(ROOT, "tests/testdata/servers/notes_server.ts"),
    });
    registry ??= await startRegistry();
    if (!served) {
      const home = fakeHome(fix.servers);
      plantSkills(home, fix);
      await fix.login(join(home, "state")); // serve's state dir: it finds the tokens there
      served = await serve(
        {
          CODEMODE_RUNTIME: engine,
          CODEMODE_MAX_OUTPUT: "256k",
          CODEMODE_MEMORY: "256m",
          CODEMODE_TIMEOUT: "20",
          CODEMODE_MOUNTS: mountSetting(),
          // Every call of the notes server waits for the person, who declines after a second.
          CODEMODE_CONFIRM_TOOLS: "notes/*",
          // Servers may be added from the registry with the person's approval, which never comes.
          CODEMODE_REGISTRY_URL: registry.url,
          CODEMODE_ADD_SERVERS: "ask",
          // Every attempt is traced: the collector is one more place no secret may reach.
          CODEMODE_OTLP_ENDPOINT: fix.otlp.url,
          OTEL_BSP_SCHEDULE_DELAY: "200",
        },
        home,
        askingClient(`adversarial-${engine}`, reply.after(1000, reply.decline())).client,
      );
    }
    const code = prelude(fix);
    const s = served;
    return {
      engine,
      served: s,
      fix,
      registry,
      async run(source, timeout = 20) {
        const answer = await runWithin(s, code + source, timeout, timeout * 1000 + SLACK_MS);
        answers.push(answer);
        return answer;
      },
    };
  };

  for (const attempt of ATTEMPTS) {
    Deno.test({
      name: `${engine}: ${attempt.area}: ${attempt.name}${
        attempt.seccomp ? " [needs codemode's seccomp profile]" : ""
      }`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      async fn() {
        const ctx = await context();
        try {
          if (attempt.steps) await attempt.steps(ctx);
          else await attempt.check!(await ctx.run(attempt.code!, attempt.timeout), ctx);
        } finally {
          if (attempt.fresh) await ctx.run("os.kill(os.getpid(), signal.SIGKILL)", 10);
        }
        await assertStillServing(ctx.served);
      },
    });
  }

  Deno.test({
    name: `${engine}: after every attempt no container of the serve is left and no answer held a secret`,
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const ctx = await context();
      const pid = ctx.served.transport.pid;
      let live: string[] = [];
      try {
        await assertStillServing(ctx.served);
        live = await sandboxesOf(runtime, pid);
      } finally {
        await ctx.served.close();
        await ctx.fix.close();
        await ctx.registry?.close();
      }
      try {
        await assertNoSandboxOf(runtime, pid);
      } finally {
        // Whatever was left is failed on above, then removed so the machine stays clean.
        for (const name of await sandboxesOf(runtime, pid)) await runtime.remove(name).catch(() => {});
      }
      // While serving, exactly the live sandbox carried the serve's pid label: the label check above can
      // fail, and no earlier container outlived its session.
      assert.deepEqual(live.length, 1, `expected just the live sandbox: ${live.join(", ")}`);
      const everySecret = [...ctx.fix.secrets, ...ctx.fix.oauth.issued()];
      for (const answer of answers) {
        const text = answer.text + JSON.stringify(answer.structured);
        for (const secret of everySecret) {
          assert.ok(!text.includes(secret), `a secret is in: ${text.slice(0, 300)}`);
        }
      }
      assert.ok(answers.length > 0, "no answer to sweep for secrets");
      const exported = ctx.fix.otlp.bodies.map((b) => new TextDecoder("latin1").decode(b)).join("\n");
      for (const secret of everySecret) {
        assert.ok(!exported.includes(secret), "a secret reached the collector");
      }
      assert.ok(ctx.fix.otlp.spans.length > 0, "the serve's spans reached the collector");
    },
  });
}

// The dashboard: attacks from other origins, other Hosts, other local users. One stdio serve, one ui.
{
  const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
  const otherUser = otherLocalUser();
  let dashboard: Promise<{ ctx: DashboardCtx; close(): Promise<void> }> | undefined;
  const setUp = () =>
    dashboard ??= (async () => {
      const home = fakeHome();
      const served = await serve({
        CODEMODE_RUNTIME: "podman",
        CODEMODE_CONFIRM_TOOLS: "memory/delete_entities",
      }, home);
      await served.run("await mcp_everything.echo(message='seen by the dashboard')");
      const outputs = await served.run(`from PIL import Image
from mcp import runtime
display(Image.new("RGB", (8, 8), "red"))
runtime.save_artifact("mine/notes.txt", "artifact of the user")`);
      assert.equal(outputs.isError, false, outputs.text);
      const ui = await startUi(home);
      const login = await send(ui.loginUrl);
      const cookie = String(login.headers["set-cookie"]).split(";")[0];
      const ctx: DashboardCtx = {
        url: ui.url,
        cookie,
        usedLoginUrl: ui.loginUrl,
        stateDir: join(home, "state"),
        servePid: served.transport.pid!,
        uiPid: ui.child.pid!,
        otherUser,
        run: (code) => served.run(code),
        memoryFile: join(home, "memory.jsonl"),
      };
      const shown = async () => {
        const r = await send(ui.url + "api/state", { headers: { cookie } });
        return (JSON.parse(r.body).serves as { pid: number }[]).some((s) => s.pid === ctx.servePid);
      };
      for (let i = 0; i < 40 && !(await shown()); i++) await new Promise((r) => setTimeout(r, 250));
      assert.ok(await shown(), "the dashboard shows the serve before the attacks");
      return { ctx, close: async () => (await ui.stop(), await served.close()) };
    })();
  for (const attack of [...dashboardAttacks, ...dashboardFileAttacks]) {
    Deno.test({
      name: `dashboard: ${attack.name}`,
      ignore: !usable || (attack.otherUser && !otherUser),
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => await attack.run((await setUp()).ctx),
    });
  }
  Deno.test({
    name: "dashboard: tear down",
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => await (await dashboard)?.close(),
  });
}
