// Preloaded into server-everything by scripts/tail_probe.ts (`node --require`): the wall-clock time of each
// read from stdin and each write to stdout, and each of its garbage collections, written as JSON to
// $TAIL_PROBE_MARKS every second and at exit. Times are Unix epoch milliseconds, as Python's time.time_ns().
"use strict";
const { PerformanceObserver, performance } = require("node:perf_hooks");
const { writeFileSync } = require("node:fs");
const marks = { reads: [], writes: [], gcs: [] };
const now = () => performance.timeOrigin + performance.now();
process.stdin.prependListener("data", () => marks.reads.push(now()));
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (...args) => (marks.writes.push(now()), write(...args));
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    marks.gcs.push([performance.timeOrigin + entry.startTime, entry.duration]);
  }
}).observe({ entryTypes: ["gc"] });
const dump = () => writeFileSync(process.env.TAIL_PROBE_MARKS, JSON.stringify(marks));
setInterval(dump, 1000).unref();
process.on("exit", dump);
