/**
 * The adversarial suite for one engine: every attempt of a table run through one real `codemode serve` over
 * stdio with the SDK client, each followed by a check that the server still runs code; then a last test
 * that no container of that serve is left and no answer held a secret. adversarial_test.ts runs it on
 * podman and docker, adversarial_gvisor_test.ts on podman under gVisor.
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type Attempt, type Ctx, type Fixtures, fixtures, prelude } from "./_adversarial.ts";
import { plantSkills } from "./_attempts_skills.ts";
import { mountSetting } from "./_attempts_files.ts";
import { askingClient, reply } from "./_approvals.ts";
import { startRegistry, type TestRegistry } from "./_registry.ts";
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

/** How long past its own timeout a run may take to be answered (sandbox restarts, CPU contention). */
const SLACK_MS = 60_000;

/** One engine's run of the suite. */
export interface SuiteOptions {
  /** How the tests are named ("podman", "podman gvisor"). */
  label: string;
  /** CODEMODE_RUNTIME of the serve. */
  engine: string;
  /** The same engine, to find the serve's containers with. */
  runtime: RuntimePlugin & ImageStore;
  attempts: Attempt[];
  /** More settings for the serve (CODEMODE_ISOLATION). */
  env?: Record<string, string>;
}

/** Registers the suite's tests; they are ignored, loudly, where the engine or the image is missing. */
export async function adversarialSuite(options: SuiteOptions): Promise<void> {
  const { label, engine, runtime } = options;
  const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
  if (!usable) console.warn(`IGNORED adversarial suite on ${label}: engine or image ${TEST_IMAGE} missing`);

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
          ...options.env,
        },
        home,
        askingClient(`adversarial-${label.replaceAll(" ", "-")}`, reply.after(1000, reply.decline())).client,
      );
    }
    const code = prelude(fix);
    const s = served;
    return {
      engine,
      isolation: options.env?.CODEMODE_ISOLATION ?? "container",
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

  for (const attempt of options.attempts) {
    Deno.test({
      name: `${label}: ${attempt.area}: ${attempt.name}${
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
    name: `${label}: after every attempt no container of the serve is left and no answer held a secret`,
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
    },
  });
}
