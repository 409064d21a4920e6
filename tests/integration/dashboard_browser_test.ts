/// <reference lib="dom" />
/**
 * The dashboard in a real browser (Debian's headless Chromium through puppeteer-core): `codemode ui`
 * shows a stdio `codemode serve` driven by the SDK client, with real podman sandboxes and the npm
 * reference servers: runs with their tool calls, images (PIL, matplotlib) and tables, artifacts
 * downloaded through the page, approvals answered on the page (the client's own question withdrawn),
 * skills, a server added from a registry (its question answered on the page, its find and add in the run,
 * the server listed). `serve --http` shows itself at `/` behind its token, and its page answers the approvals of a
 * client that cannot be asked. Also writes the screenshots of docs/dashboard.md (into docs/images when
 * CODEMODE_UPDATE_SCREENSHOTS=1).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { fakeHome, serve, type Served } from "./_serve.ts";
import { connectHttp, type HttpServe, startHttpServe } from "./_serve_http.ts";
import { HAVE_CHROMIUM, launchBrowser, screenshotPath, startUi, type UiProcess } from "./_browser.ts";
import { type AskingClient, askingClient, reply } from "./_approvals.ts";
import { startRegistry, type TestRegistry } from "./_registry.ts";
import { execFileSync } from "node:child_process";

const runtime = podman();
const usable = HAVE_CHROMIUM && (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED dashboard browser suite: chromium, podman or image ${TEST_IMAGE} missing`);

/** Text that a careless page would turn into elements. */
const HOSTILE = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>`;

interface World {
  home: string;
  served: Served;
  /** The serve's client: it declares elicitation and never answers, so only the page can. */
  asking: AskingClient;
  ui: UiProcess;
  browser: Browser;
  page: Page;
  /** Console errors and uncaught page errors seen so far, on any page. */
  problems: string[];
  dialogs: string[];
  registry: TestRegistry;
}

let world: Promise<World> | undefined;
const setUp = () =>
  world ??= (async () => {
    const home = fakeHome();
    writeSkill(home);
    // npx in this HOME finds the registry's packages in npm's own cache.
    writeFileSync(
      join(home, ".npmrc"),
      `cache=${execFileSync("npm", ["config", "get", "cache"]).toString().trim()}\n`,
    );
    const registry = await startRegistry();
    const asking = askingClient("codemode-tests", reply.never());
    const served = await serve(
      {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_TIMEOUT: "60",
        CODEMODE_CONFIRM_TOOLS: "memory/delete_entities",
        CODEMODE_REGISTRY_URL: registry.url,
        CODEMODE_ADD_SERVERS: "ask",
      },
      home,
      asking.client,
    );
    const ui = await startUi(home);
    const browser = await launchBrowser();
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 820 });
    const w: World = { home, served, asking, ui, browser, page, problems: [], dialogs: [], registry };
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

/** A skill in the test HOME's user skill directory, as `runtime.save_skill` would leave it. */
function writeSkill(home: string): void {
  const dir = join(home, ".config", "codemode", "skills", "csv-summary");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "SKILL.md"),
    "---\nname: csv-summary\ndescription: Summarize the columns of a CSV file (counts, means, ranges)\n" +
      'version: "2"\n---\n\n# csv-summary\n\nCall `summarize(text)` with the CSV text.\n',
  );
  writeFileSync(
    join(dir, "skill.py"),
    "import csv, io\n\ndef summarize(text):\n    rows = list(csv.DictReader(io.StringIO(text)))\n" +
      "    return {'rows': len(rows)}\n\nasync def columns(text):\n    return text.splitlines()[0].split(',')\n\n" +
      "def _helper():\n    pass\n",
  );
}

/** SHA-256 of bytes, hex. */
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

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

test("text that looks like HTML or script in tool arguments, output and SVG or HTML displays is shown as text", async (w) => {
  const r = await w.served.run(`# hostile text
class Svg:
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=3"><script>window.__pwned=4</script></svg>'
class Page:
    def _repr_html_(self):
        return ${JSON.stringify(HOSTILE)}
display(Svg())
display(Page())
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
    svgs: document.querySelectorAll("main svg").length,
    displays: [...document.querySelectorAll("tr.detail pre.display-text")].map((p) => p.textContent),
    args: document.querySelector("tr.detail pre.args")!.textContent,
    stdout: [...document.querySelectorAll("tr.detail .block pre")].map((p) => p.textContent).join("\n"),
  }));
  assert.equal(seen.pwned, undefined, "no script ran");
  assert.deepEqual(
    [seen.images, seen.bold, seen.scripts, seen.svgs],
    [0, 0, 0, 0],
    "no element was made from the text",
  );
  assert.match(
    seen.displays[0]!,
    /^<svg xmlns=.*<script>window.__pwned=4<\/script><\/svg>$/,
    "the SVG, as source",
  );
  assert.equal(seen.displays[1], HOSTILE, "the HTML, as source");
  assert.ok(seen.args!.includes(HOSTILE.replaceAll('"', '\\"')), seen.args!);
  assert.ok(seen.stdout.includes(HOSTILE), seen.stdout);
  assert.deepEqual(w.dialogs, []);
  assert.deepEqual(w.problems, []);
});

test("the other panels show sessions with their jobs' live output, servers with their tools, search and the policy", async (w) => {
  const { page } = w;
  // A background job printing hostile text, then a beat the page must show as it comes.
  const started = await w.served.run(`from mcp import runtime
async def beat():
    print(${JSON.stringify(HOSTILE)})
    n = 0
    while True:
        n += 1
        print("beat", n)
        await asyncio.sleep(0.5)
dashboard_job = runtime.start_job(beat, name="heartbeat")`);
  assert.equal(started.isError, false, started.text);
  await page.click('[data-tab="sessions"]');
  await page.waitForFunction(() => document.querySelector("main")!.textContent!.includes("codemode-"));
  assert.match(await page.$eval("main", (m) => m.textContent!), /codemode-tests/, "the client's name");
  await page.waitForFunction(
    () => document.querySelector("table.jobs tr.job")?.textContent?.includes("heartbeat"),
    {
      timeout: 15_000,
    },
  );
  const beatNow = async () =>
    Number(/beat (\d+)\s*$/.exec(await page.$eval("pre.job-output", (p) => p.textContent!))?.[1] ?? 0);
  const first = await beatNow();
  await page.waitForFunction(
    (first) =>
      Number(/beat (\d+)\s*$/.exec(document.querySelector("pre.job-output")!.textContent!)?.[1] ?? 0) >
        first + 1,
    { timeout: 15_000 },
    first,
  );
  const row = await page.$eval("table.jobs tr.job", (r) => r.textContent!);
  assert.match(row, /heartbeat\s*running/);
  assert.ok(row.includes(HOSTILE), "the job's output is shown as text");
  assert.equal(await page.evaluate(() => (window as { __pwned?: number }).__pwned), undefined);
  await page.screenshot({ path: screenshotPath("dashboard-sessions") });
  await w.served.run("dashboard_job.cancel()");
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

test("a run's images render inline (PIL and matplotlib), its table as text, and its artifacts download byte for byte", async (w) => {
  const { page } = w;
  const answer = await w.served.run(`# plot and report
import hashlib, os
import matplotlib.pyplot as plt, pandas as pd
from PIL import Image, ImageDraw
from mcp import runtime
badge = Image.new("RGB", (180, 60), "#f4f4f1")
ImageDraw.Draw(badge).rectangle([6, 6, 173, 53], outline="#1f5fbf", width=5)
display(badge)
sales = pd.DataFrame({"month": ["Jan", "Feb", "Mar", "Apr"], "sales": [120, 135, 160, 152]})
display(sales)
plt.figure(figsize=(5, 2.6))
plt.plot(sales.month, sales.sales, marker="o")
plt.title("Sales by month")
data = os.urandom(150_000)
runtime.save_artifact("report/data.bin", data)
os.makedirs("/workspace/artifacts/report", exist_ok=True)
sales.to_csv("/workspace/artifacts/report/sales.csv", index=False)
hashlib.sha256(data).hexdigest()`);
  assert.equal(answer.isError, false, answer.text);
  const digest = String(answer.structured.value).replaceAll("'", "");
  assert.match(digest, /^[0-9a-f]{64}$/);
  await runRow(page, "# plot and report", 0);
  await openRun(page, "# plot and report");
  // Both images load from the dashboard's API and decode: naturalWidth > 0.
  await page.waitForFunction(() => {
    const images = [...document.querySelectorAll<HTMLImageElement>("tr.detail img.display-image")];
    return images.length === 2 && images.every((i) => i.complete && i.naturalWidth > 0);
  }, { timeout: 10_000 });
  const shown = await page.$$eval("tr.detail img.display-image", (images) =>
    images.map((i) => ({
      width: (i as HTMLImageElement).naturalWidth,
      src: (i as HTMLImageElement).getAttribute("src")!,
    })));
  assert.equal(shown[0].width, 180, "the PIL image, at its own size");
  assert.ok(shown[1].width > 300, `the matplotlib figure: ${shown[1].width}px wide`);
  const served = await page.evaluate(async (src) => {
    const r = await fetch(src);
    return { type: r.headers.get("content-type"), nosniff: r.headers.get("x-content-type-options") };
  }, shown[1].src);
  assert.deepEqual(served, { type: "image/png", nosniff: "nosniff" });
  const table = await page.$eval("tr.detail pre.display-text", (p) => p.textContent!);
  assert.match(table, /month\s+sales/);
  assert.match(table, /Mar\s+160/);
  // The artifacts: listed with their sizes, and the link downloads the very bytes the sandbox wrote.
  const names = await page.$$eval(
    "tr.detail tr.artifact",
    (rows) => rows.map((r) => r.getAttribute("data-artifact")),
  );
  assert.deepEqual(names, ["report/data.bin", "report/sales.csv"]);
  await page.screenshot({ path: screenshotPath("dashboard-run-displays"), fullPage: true });
  const downloads = mkdtempSync(join(tmpdir(), "codemode-downloads-"));
  const cdp = await w.browser.target().createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
  await page.click('tr.detail tr.artifact[data-artifact="report/data.bin"] a.download');
  const file = join(downloads, "data.bin");
  for (let i = 0; i < 100 && !(existsSync(file) && readdirSync(downloads).length === 1); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(readdirSync(downloads), ["data.bin"], "the download finished");
  const bytes = readFileSync(file);
  assert.equal(bytes.length, 150_000);
  assert.equal(sha256(bytes), digest, "byte for byte what the sandbox wrote");
  await cdp.detach();
  assert.deepEqual(w.problems, []);
});

test("an approval given on the page reaches the waiting call, and the client's own question is withdrawn", async (w) => {
  const { page } = w;
  await w.served.run(
    `await mcp_memory.create_entities(entities=[{"name": "to-delete", "entityType": "doc", "observations": ["x"]}])`,
  );
  const pending = w.served.run(`# delete with approval
r = await mcp_memory.delete_entities(entityNames=["to-delete"])
print(r)
(await mcp_memory.read_graph())["entities"]`);
  await page.waitForSelector(".approvals-pending .approval", { timeout: 20_000 });
  const question = await page.$eval(".approvals-pending .approval", (el) => el.textContent!);
  assert.match(question, /memory \/ delete_entities/);
  assert.match(question, /entityNames=\["to-delete"\]/);
  assert.match(question, /CODEMODE_CONFIRM_TOOLS/);
  assert.match(question, /The MCP client was asked too/);
  assert.equal(w.asking.questions.length, 1, "the client got the question too");
  // The question above the runs, the run with the images and artifacts still open below it.
  await page.evaluate(() => globalThis.scrollTo(0, 0));
  await page.screenshot({ path: screenshotPath("dashboard-approval"), fullPage: true });
  await page.click('.approvals-pending button[data-answer="approve"]');
  const answer = await pending;
  assert.equal(answer.isError, false, answer.text);
  assert.match(answer.text, /Entities deleted successfully/);
  assert.doesNotMatch(String(answer.structured.value), /to-delete/, "the entity is gone");
  assert.ok(w.asking.questions[0].answeredAt, "the client's question was withdrawn when the page answered");
  await page.waitForFunction(() => !document.querySelector(".approvals-pending"), { timeout: 5_000 });
  await runRow(page, "# delete with approval", 2);
  await openRun(page, "# delete with approval");
  const log = await page.$eval("tr.detail ul.approval-log", (ul) => ul.textContent!);
  assert.match(log, /memory \/ delete_entities\s*approved on the dashboard/);
  const calls = await page.$$eval(
    "tr.detail tr.call",
    (rows) => rows.map((r) => `${r.getAttribute("data-tool")} ${r.querySelector(".badge")!.textContent}`),
  );
  assert.deepEqual(calls, ["memory/delete_entities ok", "memory/read_graph ok"]);
  assert.deepEqual(w.problems, []);
});

test("a plan's one question shows its description and calls on the page, and is approved there", async (w) => {
  const { page } = w;
  const pending = w.served.run(`# a plan approved on the page
from mcp import runtime
async with runtime.plan("file two notes") as p:
    for name in ("plan-a", "plan-b"):
        await mcp_memory.create_entities(entities=[{"name": name, "entityType": "note", "observations": []}])
sorted(e["name"] for e in (await mcp_memory.read_graph())["entities"] if e["name"].startswith("plan-"))`);
  await page.waitForSelector('.approvals-pending .approval[data-kind="plan"]', { timeout: 20_000 });
  const question = await page.$eval('.approval[data-kind="plan"]', (el) => el.textContent!);
  assert.match(question, /plan: “file two notes”/);
  assert.match(question, /\(2 calls on memory\)/);
  assert.match(question, /memory\/create_entities: entities=\[\{"name":"plan-a"/);
  assert.match(question, /memory\/create_entities: entities=\[\{"name":"plan-b"/);
  assert.equal(
    await page.$$eval('.approval[data-kind="plan"] button[data-answer="approve"]', (b) => b.length),
    1,
  );
  await page.click('.approval[data-kind="plan"] button[data-answer="approve"]');
  const answer = await pending;
  assert.equal(answer.isError, false, answer.text);
  assert.equal(answer.structured.value, "['plan-a', 'plan-b']");
  await runRow(page, "# a plan approved on the page", 3);
  await openRun(page, "# a plan approved on the page");
  const log = await page.$eval("tr.detail ul.approval-log", (ul) => ul.textContent!);
  assert.match(log, /plan: “file two notes”\s*approved on the dashboard/);
  assert.deepEqual(w.problems, []);
});

test("a server added from the registry: its question answered on the page, its find and add in the run, it is listed", async (w) => {
  const { page } = w;
  const pending = w.served.run(
    `# add from the registry
from mcp import runtime
found = [f["name"] for f in await runtime.find_servers("server-memory")]
info = await runtime.add_server("io.github.modelcontextprotocol/server-memory", alias="added_mem")
(found, info["alias"], "entities" in await mcp_added_mem.read_graph())`,
    120,
  );
  await page.waitForSelector('.approvals-pending .approval[data-kind="add_server"]', { timeout: 90_000 });
  const question = await page.$eval('.approval[data-kind="add_server"]', (el) => el.textContent!);
  assert.match(question, /Add server io\.github\.modelcontextprotocol\/server-memory as mcp_added_mem/);
  assert.match(question, /It runs: npx -y @modelcontextprotocol\/server-memory@2026\.8\.31/);
  assert.match(question, /CODEMODE_ADD_SERVERS is "ask"/);
  assert.deepEqual(
    await page.$$eval(
      '.approval[data-kind="add_server"] button[data-answer="approve"]',
      (b) => b.map((x) => x.dataset.scope),
    ),
    ["session", "keep"],
  );
  await page.evaluate(() => globalThis.scrollTo(0, 0));
  await page.screenshot({ path: screenshotPath("dashboard-add-server"), fullPage: true });
  await page.click('.approval[data-kind="add_server"] button[data-scope="session"]');
  const answer = await pending;
  assert.equal(answer.isError, false, answer.text);
  assert.equal(
    answer.structured.value,
    "(['io.github.modelcontextprotocol/server-memory'], 'added_mem', True)",
  );
  await runRow(page, "# add from the registry", 1);
  await openRun(page, "# add from the registry");
  const log = await page.$eval("tr.detail ul.registry-log", (ul) => ul.textContent!.replace(/\s+/g, " "));
  assert.match(log, /find_servers\("server-memory"\) on 127\.0\.0\.1:\d+: 1 found/);
  assert.match(
    log,
    /add_server\("io\.github\.modelcontextprotocol\/server-memory"\) added as mcp_added_mem, 9 tools/,
  );
  assert.match(
    await page.$eval("tr.detail ul.approval-log", (ul) => ul.textContent!),
    /add io\.github\.modelcontextprotocol\/server-memory as mcp_added_mem\s*approved on the dashboard \(for the session\)/,
  );
  await page.click('[data-tab="servers"]');
  await page.waitForSelector('tr.added[data-added="added_mem"]');
  assert.match(await page.$eval('tr.added[data-added="added_mem"]', (r) => r.textContent!), /npx -y/);
  await page.click('[data-tab="runs"]');
  assert.deepEqual(w.problems, []);
});

test("skills are listed with their functions and SKILL.md, and search finds them", async (w) => {
  const { page } = w;
  await page.click('[data-tab="skills"]');
  await page.waitForSelector('tr.skill[data-skill="csv-summary"]', { timeout: 10_000 });
  const row = await page.$eval(
    'tr.skill[data-skill="csv-summary"]',
    (r) => [...r.children].map((c) => c.textContent!.trim()),
  );
  assert.match(row[0], /^csv-summary\s*v2$/);
  assert.deepEqual(row.slice(1), [
    "skills.csv_summary",
    "code",
    "summarize, columns",
    "Summarize the columns of a CSV file (counts, means, ranges)",
    "user",
  ]);
  await page.click('tr.skill[data-skill="csv-summary"]');
  await page.waitForSelector("pre.manifest");
  assert.match(await page.$eval("pre.manifest", (p) => p.textContent!), /Call `summarize\(text\)`/);
  await page.screenshot({ path: screenshotPath("dashboard-skills") });
  await page.click('[data-tab="search"]');
  await page.type("input.search", "summarize csv columns");
  await page.waitForSelector('table.hits tr[data-kind="skill"]', { timeout: 10_000 });
  assert.match(
    await page.$eval('table.hits tr[data-kind="skill"]', (r) => r.textContent!),
    /skills\s*skill\s*csv-summary/,
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
  name:
    "serve --http shows its own dashboard at /, with the token as a bearer header or once in /?token=, and its page answers for a client that cannot be asked",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const w = await setUp();
    const token = "dash-token-4f1e0a";
    let http: HttpServe | undefined;
    const context = await w.browser.createBrowserContext();
    try {
      http = await startHttpServe(fakeHome(), {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_HTTP_TOKEN: token,
        CODEMODE_CONFIRM_TOOLS: "memory/delete_entities",
      });
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
      // This client declared no elicitation: with the page open, its question waits for the page.
      const waiting = client.run(`try:
    await mcp_memory.delete_entities(entityNames=["nobody"])
    out = "called"
except PermissionError as e:
    out = str(e)
out`);
      await page.waitForSelector(".approvals-pending .approval", { timeout: 20_000 });
      assert.match(
        await page.$eval(".approvals-pending .approval", (el) => el.textContent!),
        /The MCP client cannot be asked: only this page can answer/,
      );
      await page.click('.approvals-pending button[data-answer="decline"]');
      const declined = await waiting;
      assert.equal(declined.value, `'Call to "memory/delete_entities" declined by the user'`);
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
    await w.registry.close();
  },
});
