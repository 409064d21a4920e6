/**
 * The host's record of a session's background jobs (core/host_api/jobs.ts), fed frames as a hostile
 * sandbox might send them: bounded, refusing what does not fit, enforcing CODEMODE_MAX_JOB_TIME whatever
 * the sandbox answers.
 */
import assert from "node:assert/strict";
import { JOB_LIMITS, SessionJobs } from "../../core/host_api/jobs.ts";

function jobs(options: { maxJobs?: number; maxJobSeconds?: number; cancelGraceSeconds?: number } = {}) {
  const cancels: [string, string][] = [];
  const record = new SessionJobs({
    session: "codemode-test-1",
    maxJobs: options.maxJobs ?? 4,
    maxJobSeconds: options.maxJobSeconds ?? 3600,
    cancelGraceSeconds: options.cancelGraceSeconds,
    cancel: (id, reason) => void cancels.push([id, reason]),
  });
  return { record, cancels };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("SessionJobs follows a job from start to end: output tail, tool calls, its calls' context and a note", () => {
  const { record } = jobs();
  assert.equal(
    record.take({ type: "job", id: "job-1", name: "crawl", kind: "job", state: "running" }),
    undefined,
  );
  assert.equal(record.live, 1);
  record.take({ type: "job_output", id: "job-1", stream: "stdout", data: "x".repeat(40_000) + "end\n" });
  const context = record.context("job-1", "codemode-test-1");
  assert.ok(context && !context.signal.aborted);
  assert.equal(context.requestId, "job-1@codemode-test-1");
  record.toolCall("job-1");
  record.take({ type: "job", id: "job-1", state: "done" });
  assert.equal(record.live, 0);
  assert.ok(context.signal.aborted, "calls still in flight stop with the job");
  assert.equal(record.context("job-1", "codemode-test-1"), undefined, "an ended job calls nothing");
  const [info] = record.list();
  assert.equal(info.state, "done");
  assert.equal(info.toolCalls, 1);
  assert.equal(info.output.length, JOB_LIMITS.outputTail);
  assert.ok(info.output.endsWith("end\n"));
  assert.match(
    record.takeNotes()[0],
    /^background work ended since the last run: job job-1 \("crawl"\) done;/,
  );
  assert.deepEqual(record.takeNotes(), [], "each job is reported once");
});

Deno.test("SessionJobs refuses frames that do not fit: unknown jobs, a second start, jobs beyond CODEMODE_MAX_JOBS", () => {
  const { record, cancels } = jobs({ maxJobs: 2 });
  assert.equal(
    record.take({ type: "job_output", id: "job-9", stream: "stdout", data: "x" }),
    "output of an unknown job",
  );
  assert.equal(record.take({ type: "job", id: "job-9", state: "done" }), "the end of an unknown job");
  record.take({ type: "job", id: "job-1", state: "running" });
  assert.equal(record.take({ type: "job", id: "job-1", state: "running" }), "a job started twice");
  record.take({ type: "job", id: "job-2", state: "running" });
  assert.equal(
    record.take({ type: "job", id: "job-3", state: "running" }),
    "a job beyond CODEMODE_MAX_JOBS (2)",
  );
  assert.deepEqual(cancels, [["job-3", "over CODEMODE_MAX_JOBS"]]);
  assert.equal(record.live, 2);
  record.take({
    type: "job",
    id: "job-1",
    name: "\u001b[31mred\u0007",
    state: "failed",
    error: "boom\u001b]0;x",
  });
  const failed = record.list().find((j) => j.id === "job-1")!;
  assert.equal(failed.error, "boom]0;x", "no control characters reach a log or a terminal");
});

Deno.test("SessionJobs keeps the newest finished jobs only", () => {
  const { record } = jobs({ maxJobs: 1 });
  for (let i = 0; i < JOB_LIMITS.finished + 10; i++) {
    record.take({ type: "job", id: `job-${i}`, state: "running" });
    record.take({ type: "job", id: `job-${i}`, state: "done" });
  }
  const kept = record.list();
  assert.equal(kept.length, JOB_LIMITS.finished);
  assert.equal(kept[0].id, "job-10");
  assert.match(record.takeNotes()[0], /, and 45 more;/);
});

Deno.test("past CODEMODE_MAX_JOB_TIME a job is cancelled, and stops counting as running even if the sandbox ignores it", async () => {
  const { record, cancels } = jobs({ maxJobSeconds: 0.05, cancelGraceSeconds: 0.05 });
  record.take({ type: "job", id: "job-1", name: "forever", state: "running" });
  await sleep(80);
  assert.equal(cancels.length, 1);
  assert.match(cancels[0][1], /^ran past CODEMODE_MAX_JOB_TIME \(0\.05s\) and was cancelled/);
  assert.equal(record.live, 1, "the sandbox has its grace to stop it");
  await sleep(100);
  assert.equal(record.live, 0);
  const [info] = record.list();
  assert.equal(info.overtime, true);
  assert.match(info.error ?? "", /did not stop within 0\.05s$/);
});

Deno.test("SessionJobs.close() ends every running job with the session", () => {
  const { record } = jobs();
  record.take({ type: "job", id: "job-1", state: "running" });
  const context = record.context("job-1", "s")!;
  record.close("idle");
  assert.equal(record.live, 0);
  assert.ok(context.signal.aborted);
  assert.equal(record.list()[0].error, "the session ended (idle)");
  assert.equal(record.take({ type: "job", id: "job-2", state: "running" }), undefined, "ignored after close");
  assert.equal(record.live, 0);
});
