/**
 * The adversarial suite: more than fifty named escape and abuse attempts by sandbox code (network,
 * filesystem, privileges, resources, protocol forgery, secrets of MCP servers, the host environment,
 * artifacts, mounts, skills, approvals, servers added from a registry, and background jobs),
 * each run through a real `codemode serve` over stdio with the SDK client, on every container engine that
 * is set up. After each attempt: the call was answered within a bound, the server still runs code. At the
 * end: no container of that serve process is left, and no secret appeared in any answer. Then the
 * dashboard's attacks (_attempts_dashboard.ts): other origins, other Hosts, stolen codes and cookies,
 * files planted by another local user, traversal in run image and artifact names, other sessions'
 * artifacts, script in displays, forged answers to a pending approval.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { Attempt } from "./_adversarial.ts";
import { adversarialSuite } from "./_adversarial_suite.ts";
import { filesystem, network, privileges } from "./_attempts_escape.ts";
import { hostEnv, protocol, resources, secrets } from "./_attempts_abuse.ts";
import { displays } from "./_attempts_display.ts";
import { artifacts, mounts } from "./_attempts_files.ts";
import { skills } from "./_attempts_skills.ts";
import { approvals } from "./_attempts_approvals.ts";
import { registry as registryAttempts } from "./_attempts_registry.ts";
import { jobs } from "./_attempts_jobs.ts";
import { oauthTokens } from "./_attempts_oauth.ts";
import { fakeHome, serve } from "./_serve.ts";
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
  ...jobs,
];
Deno.test("the adversarial table has at least 30 distinct attempts", () => {
  const names = ATTEMPTS.map((a) => `${a.area}: ${a.name}`);
  assert.equal(new Set(names).size, names.length);
  assert.ok(names.length >= 30, `${names.length} attempts`);
});

await adversarialSuite({ label: "podman", engine: "podman", runtime: podman(), attempts: ATTEMPTS });
await adversarialSuite({ label: "docker", engine: "docker", runtime: docker(), attempts: ATTEMPTS });

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
