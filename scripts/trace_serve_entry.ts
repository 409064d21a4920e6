/**
 * Issue 31, where a traced tool call's main-thread CPU goes inside a real serve: `codemode serve` from
 * source that takes a V8 CPU profile of itself between two SIGUSR2 (the first starts it, the second writes
 * it to $TRACE_PROFILE), and turns tracing on (to $TRACE_URL) and off again at each SIGUSR1, so one serve
 * can be measured both ways. Driven by trace_serve_profile.ts.
 * @module
 */
import process from "node:process";
import { startTracing, stopTracing, tracingOn } from "../core/observe/trace.ts";
import { type CpuProfile, startCpuProfile } from "./cpu_profile.ts";

let stopProfile: Promise<(file: string) => Promise<CpuProfile>> | undefined;
process.on("SIGUSR2", () => {
  if (!stopProfile) {
    stopProfile = startCpuProfile(100);
    return;
  }
  const stopping = stopProfile;
  stopProfile = undefined;
  void stopping.then((stop) => stop(process.env.TRACE_PROFILE!));
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
