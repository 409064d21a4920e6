/**
 * Issue 31, where a traced tool call's main-thread CPU goes inside a real serve: `codemode serve` from
 * source that takes a V8 CPU profile of itself between two SIGUSR2 (the first starts it, the second writes
 * it to $TRACE_PROFILE), and turns tracing on (to $TRACE_URL) and off again at each SIGUSR1, so one serve
 * can be measured both ways. Driven by trace_serve_profile.ts.
 * @module
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import process from "node:process";
import { startTracing, stopTracing, tracingOn } from "../core/observe/trace.ts";

const inspector = new Session();
const post = (method: string, params: object = {}) =>
  new Promise<unknown>((resolve, reject) =>
    inspector.post(method, params, (error, result) => error ? reject(error) : resolve(result))
  );
let profiling = false;
process.on("SIGUSR2", () => {
  if (!profiling) {
    profiling = true;
    inspector.connect();
    void post("Profiler.enable").then(() => post("Profiler.setSamplingInterval", { interval: 100 }))
      .then(() => post("Profiler.start"));
    return;
  }
  void post("Profiler.stop").then((r) => {
    writeFileSync(process.env.TRACE_PROFILE!, JSON.stringify((r as { profile: unknown }).profile));
    inspector.disconnect();
    profiling = false;
  });
});
process.on("SIGUSR1", () => {
  if (tracingOn()) void stopTracing();
  else {
    void startTracing({
      url: `${process.env.TRACE_URL}/v1/traces`,
      env: process.env,
      content: false,
      version: "probe",
      node: "probe",
      redact: (text) => text,
    });
  }
});
const { main } = await import("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
