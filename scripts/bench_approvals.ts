/**
 * Section "approvals" (issue 15): what asking costs besides the person. A serve from source asks before
 * every `notes/add_note` (CODEMODE_CONFIRM_TOOLS) and its client approves the moment a question arrives;
 * sandbox code alternates that call with `notes/count_notes`, which needs no approval, on the same server.
 * Every side stamps the wall clock (one kernel clock for the container, serve, client and server):
 * the call in the sandbox, the question reaching the client, the client's answer leaving, the call
 * reaching the server. Figures are medians over the calls; the baseline is the unasked call from the
 * sandbox to the server in the same run.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { join } from "node:path";
import {
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  ROOT,
  row,
  type SectionResult,
  startServe,
  works,
} from "./bench_harness.ts";

/** Calls of each kind, made in blocks of `block` alternating kinds call by call. */
export const counts = { calls: 300, block: 50, warmUp: 50 };

const NOTES_SERVER = join(ROOT, "tests/testdata/servers/notes_server.ts");
const DENO = join(ROOT, "node_modules/.bin/deno");

/** Sandbox code: per call its start and end (ms since the epoch) and the server's arrival stamp. */
const BLOCK = (n: number) => `
import json, time
rows = []
for i in range(${n}):
    for kind in ("asked", "plain"):
        t = time.time() * 1000
        r = await (mcp_notes.add_note(text=str(i)) if kind == "asked" else mcp_notes.count_notes())
        rows.append([kind, t, r["received_at"], time.time() * 1000])
print(json.dumps(rows))
`;

type Stamp = [kind: "asked" | "plain", called: number, received: number, returned: number];

/** Runs the approvals section. */
export async function benchApprovals(): Promise<SectionResult> {
  const result: SectionResult = { name: "approvals", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome((h) => ({
    notes: {
      command: DENO,
      args: ["run", "-A", "--quiet", NOTES_SERVER],
      env: { NOTES_FILE: join(h, "notes.txt") },
    },
  }));
  // The client approves at once and stamps when each question arrived and when its answer left.
  const asked: number[] = [];
  const answered: number[] = [];
  const now = () => performance.timeOrigin + performance.now();
  const client = new Client({ name: "codemode-bench", version: "1" }, {
    capabilities: { elicitation: { form: {} } },
  });
  client.setRequestHandler("elicitation/create", () => {
    asked.push(now());
    const reply = { action: "accept" as const, content: { approve: true, scope: "once" } };
    answered.push(now());
    return reply;
  });
  try {
    const served = await startServe({
      home,
      client,
      env: {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_CONFIRM_TOOLS: "notes/add_note",
        CODEMODE_LOG_LEVEL: "warn",
      },
    });
    const stamps: Stamp[] = [];
    try {
      await served.run(BLOCK(counts.warmUp));
      asked.length = answered.length = 0;
      for (let done = 0; done < counts.calls; done += counts.block) {
        const { text } = await served.run(BLOCK(counts.block));
        stamps.push(...JSON.parse(text.trim().split("\n").at(-1)!) as Stamp[]);
      }
    } finally {
      await served.close();
    }
    const approval = stamps.filter((s) => s[0] === "asked");
    const plain = stamps.filter((s) => s[0] === "plain");
    const median = (xs: number[]) => percentile(xs, 0.5);
    const toQuestion = approval.map((s, i) => asked[i] - s[1]);
    const answerToCall = approval.map((s, i) => s[2] - answered[i]);
    const plainToServer = plain.map((s) => s[2] - s[1]);
    const askedRound = approval.map((s) => s[3] - s[1]);
    const plainRound = plain.map((s) => s[3] - s[1]);
    const baseline = { label: "an unasked call, sandbox → server, median", value: median(plainToServer) };
    const p95 = (xs: number[]) => `p95 ${percentile(xs, 0.95).toFixed(2)} ms`;
    result.rows.push(
      row({
        section: "approvals",
        metric: "call in the sandbox → question at the client",
        value: median(toQuestion),
        unit: "ms",
        baseline,
        note: `median of ${approval.length}; ${p95(toQuestion)}`,
      }),
      row({
        section: "approvals",
        metric: "answer leaves the client → call reaches the server",
        value: median(answerToCall),
        unit: "ms",
        baseline,
        note: `median of ${approval.length}; ${p95(answerToCall)}`,
      }),
      row({
        section: "approvals",
        metric: "whole call with an instant approval, in the sandbox",
        value: median(askedRound),
        unit: "ms",
        baseline: { label: "whole unasked call, median", value: median(plainRound) },
        note: `${p95(askedRound)}; the unasked call's ${p95(plainRound)}`,
      }),
    );
    result.notes.push(
      `${counts.calls} approved add_note calls alternating with ${counts.calls} unasked count_notes calls on ` +
        "the notes test server, serve from source on podman; the client answers each question the moment it " +
        "arrives, so no person's time is in the figures",
    );
  } finally {
    removeHome(home);
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  return result;
}
