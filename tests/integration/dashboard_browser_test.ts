/// <reference lib="dom" />
/**
 * The dashboard in a real browser (Debian's headless Chromium through puppeteer-core): `codemode ui`
 * shows a stdio `codemode serve` driven by the SDK client, with real podman sandboxes and the npm
 * reference servers; `serve --http` shows itself at `/` behind its token. Also writes the screenshots of
 * docs/dashboard.md (into docs/images when CODEMODE_UPDATE_SCREENSHOTS=1).
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "puppeteer-core";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { fakeHome, serve, type Served } from "./_serve.ts";
import { connectHttp, type HttpServe, startHttpServe } from "./_serve_http.ts";
import { HAVE_CHROMIUM, launchBrowser, screenshotPath, startUi, type UiProcess } from "./_browser.ts";

const runtime = podman();
const usable = HAVE_CHROMIUM && (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED dashboard browser suite: chromium, podman or image ${TEST_IMAGE} missing`);

/** Text that a careless page would turn into elements. */
const HOSTILE = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>`;

interface World {
  home: string;
  served: Served;
  ui: UiProcess;
  browser: Browser;
  page: Page;
  /** Console errors and uncaught page errors seen so far, on any page. */
  problems: string[];
  dialogs: string[];
}

let world: Promise<World> | undefined;
const setUp = () =>
  world ??= (async () => {
    const home = fakeHome();
    const served = await serve({ CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "60" }, home);
    const ui = await startUi(home);
    const browser = await launchBrowser();
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 820 });
    const w: World = { home, served, ui, browser, page, problems: [], dialogs: [] };
    page.on("console", (m) => m.type() === "error" && w.problems.push(`console: ${m.text()}`));
    page.on("pageerror", (e) => w.problems.push(`page error: ${e}`));
    page.on("dialog", (d) => {
      w.dialogs.push(d.message());
      void d.dismiss();
    });
    await page.goto(ui.loginUrl);
    return w;
  })();

const test = (name: string, fn: (w: World) => Promise<void>) =>
  Deno.test({
    name,
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => fn(await setUp()),
  });

/** Waits until the run whose code contains `marker` is listed; returns when it appeared (ms since epoch). */
async function runRow(page: Page, marker: string, calls: number, timeout = 10_000): Promise<number> {
  await page.waitForFunction(
    (marker, calls) =>
      [...document.querySelectorAll("tr.run")].some((row) =>
        row.textContent!.includes(marker) && row.querySelector(".badge")?.textContent !== "running" &&
        row.children[4]?.textContent?.startsWith(String(calls))
      ),
    { timeout, polling: 20 },
    marker,
    calls,
  );
  return Date.now();
}

async function openRun(page: Page, marker: string): Promise<void> {
  await page.evaluate((marker) => {
    const row = [...document.querySelectorAll<HTMLElement>("tr.run")].find((r) =>
      r.textContent!.includes(marker)
    );
    if (!row!.classList.contains("open")) row!.click();
  }, marker);
  await page.waitForSelector("tr.detail .run-detail");
}

test("the dashboard signs in with the login URL, drops the code from the address bar and loads with no console error", async (w) => {
  assert.equal(new URL(w.page.url()).search, "", "the code is gone from the address bar");
  await w.page.waitForSelector('[data-link="live"]', { timeout: 10_000 });
  await w.page.waitForFunction(() => document.querySelector('[data-figure="servers up"]') !== null);
  assert.deepEqual(w.problems, []);
});

test("a run made by an MCP client appears within 2 s, with each of its tool calls", async (w) => {
  const code = `# add and echo
total = (await mcp_everything.get_sum(a=40, b=2))
echo = await mcp_everything.echo(message=f"the total is {total}")
entities = await mcp_memory.create_entities(entities=[{"name": "dashboard", "entityType": "doc", "observations": ["seen"]}])
print(echo)
total`;
  const answer = await w.served.run(code);
  const answered = Date.now();
  assert.equal(answer.isError, false, answer.text);
  const shown = await runRow(w.page, "# add and echo", 3);
  assert.ok(shown - answered < 2000, `the run appeared ${shown - answered} ms after its answer`);
  await openRun(w.page, "# add and echo");
  const calls = await w.page.$$eval("tr.detail tr.call", (rows) =>
    rows.map((r) => ({
      tool: r.getAttribute("data-tool"),
      args: r.querySelector("pre.args")!.textContent,
      outcome: r.querySelector(".badge")!.textContent,
    })));
  assert.deepEqual(calls.map((c) => c.tool), [
    "everything/get-sum",
    "everything/echo",
    "memory/create_entities",
  ]);
  assert.deepEqual(calls.map((c) => c.outcome), ["ok", "ok", "ok"]);
  assert.match(calls[0].args!, /"a": 40/);
  const detail = await w.page.$eval("tr.detail", (el) => el.textContent);
  assert.match(detail!, /the total is The sum of 40 and 2 is 42/);
  await w.served.run("# a failing run shows its traceback\nimport json\njson.loads('{not json')");
  await runRow(w.page, "# a failing run", 0);
  await w.page.screenshot({ path: screenshotPath("dashboard-runs") });
  assert.deepEqual(w.problems, []);
});

test("text that looks like HTML or script in tool arguments and output is shown as text", async (w) => {
  const r = await w.served.run(`# hostile text
r = await mcp_everything.echo(message=${JSON.stringify(HOSTILE)})
print(${JSON.stringify(HOSTILE)})
r`);
  assert.equal(r.isError, false, r.text);
  await runRow(w.page, "# hostile text", 1);
  await openRun(w.page, "# hostile text");
  const seen = await w.page.evaluate(() => ({
    pwned: (window as unknown as { __pwned?: number }).__pwned,
    images: document.querySelectorAll("img").length,
    bold: document.querySelectorAll("main b").length,
    scripts: document.querySelectorAll("main script").length,
    args: document.querySelector("tr.detail pre.args")!.textContent,
    stdout: [...document.querySelectorAll("tr.detail .block pre")].map((p) => p.textContent).join("\n"),
  }));
  assert.equal(seen.pwned, undefined, "no script ran");
  assert.deepEqual([seen.images, seen.bold, seen.scripts], [0, 0, 0], "no element was made from the text");
  assert.ok(seen.args!.includes(HOSTILE.replaceAll('"', '\\"')), seen.args!);
  assert.ok(seen.stdout.includes(HOSTILE), seen.stdout);
  assert.deepEqual(w.dialogs, []);
  assert.deepEqual(w.problems, []);
});

test("the other panels show sessions, servers with their tools, search and the policy", async (w) => {
  const { page } = w;
  await page.click('[data-tab="sessions"]');
  await page.waitForFunction(() => document.querySelector("main")!.textContent!.includes("codemode-"));
  assert.match(await page.$eval("main", (m) => m.textContent!), /codemode-tests/, "the client's name");
  await page.screenshot({ path: screenshotPath("dashboard-sessions") });
  await page.click('[data-tab="servers"]');
  await page.waitForSelector('tr.server[data-server="everything"]');
  await page.click('tr.server[data-server="everything"]');
  await page.waitForSelector("ul.tools li");
  assert.match(await page.$eval("ul.tools", (u) => u.textContent!), /get-sum/);
  await page.screenshot({ path: screenshotPath("dashboard-servers") });
  await page.click('[data-tab="search"]');
  await page.type("input.search", "add two numbers");
  await page.waitForFunction(() => document.querySelector("table.hits")?.textContent?.includes("get-sum"));
  await page.screenshot({ path: screenshotPath("dashboard-search") });
  await page.click('[data-tab="policy"]');
  await page.waitForFunction(() =>
    document.querySelector("table.policy")?.textContent?.includes("allowServers")
  );
  await page.click('[data-tab="runs"]');
  assert.deepEqual(w.problems, []);
});

test("without the login cookie the page and its data are refused, and the used login URL is dead", async (w) => {
  const context = await w.browser.createBrowserContext();
  try {
    const stranger = await context.newPage();
    const page = await stranger.goto(w.ui.url);
    assert.equal(page?.status(), 401);
    assert.match(await stranger.content(), /Not signed in/);
    const again = await stranger.goto(w.ui.loginUrl);
    assert.equal(again?.status(), 401, "the login code worked once");
    for (const path of ["api/state", "api/events", "api/search?q=echo", "metrics", "assets/app.js"]) {
      const reply = await fetch(w.ui.url + path);
      assert.equal(reply.status, 401, path);
      await reply.body?.cancel();
    }
  } finally {
    await context.close();
  }
});

Deno.test({
  name: "serve --http shows its own dashboard at /, with the token as a bearer header or once in /?token=",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const w = await setUp();
    const token = "dash-token-4f1e0a";
    let http: HttpServe | undefined;
    const context = await w.browser.createBrowserContext();
    try {
      http = await startHttpServe(fakeHome(), { CODEMODE_RUNTIME: "podman", CODEMODE_HTTP_TOKEN: token });
      const root = http.url.replace(/mcp$/, "");
      assert.equal((await fetch(root)).status, 401);
      const bearer = await fetch(root, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(bearer.status, 200);
      assert.match(await bearer.text(), /<script type="importmap">/);
      const client = await connectHttp(http.url, { authorization: `Bearer ${token}` });
      await client.run("# over http\nawait mcp_everything.echo(message='hi')");
      const page = await context.newPage();
      const problems: string[] = [];
      page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
      assert.equal((await page.goto(`${root}?token=wrong`))?.status(), 401);
      problems.length = 0; // the browser logs the 401 of the page it was refused
      await page.goto(`${root}?token=${token}`);
      assert.equal(page.url(), root, "the token is dropped from the address bar");
      await runRow(page, "# over http", 1);
      await page.screenshot({ path: screenshotPath("dashboard-serve-http") });
      assert.deepEqual(problems, []);
      await client.end();
    } finally {
      await context.close();
      await http?.stop();
    }
  },
});

Deno.test({
  name: "tear down the browser, codemode ui and the serve",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    if (!world) return;
    const w = await world;
    await w.browser.close();
    await w.ui.stop();
    await w.served.close();
  },
});
