/**
 * Issue 32, the hop study: `codemode serve` from source with the host-side marks of
 * hop_stages_probe.ts loaded first: the 'data' events that carry a list_servers call and the writes of
 * rpc_result lines, in wall-clock µs, written to $HOP_MARKS at exit; with $HOP_PROFILE, a V8 profile of
 * list_servers calls 400-1200 (after hop_stages_serve.ts's warm-up).
 * @module
 */
import { EventEmitter } from "node:events";
import { writeFileSync } from "node:fs";
import { Socket } from "node:net";
import process from "node:process";
import { Writable } from "node:stream";
import { type CpuProfile, startCpuProfile } from "./cpu_profile.ts";

const now = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const marks = { data: [] as number[], writeIn: [] as number[], writeOut: [] as number[] };
let stopProfile: Promise<(file: string) => Promise<CpuProfile>> | undefined;
const emit = EventEmitter.prototype.emit;
EventEmitter.prototype.emit = function (this: EventEmitter, event: string | symbol, ...args: unknown[]) {
  if (event === "data" && args[0] instanceof Uint8Array && args[0].length < 8000) {
    const text = new TextDecoder().decode(args[0]);
    if (text.includes('"method":"list_servers"')) {
      marks.data.push(now());
      const seen = marks.data.length;
      if (process.env.HOP_PROFILE && seen === 400) stopProfile = startCpuProfile(100);
      if (process.env.HOP_PROFILE && seen === 1200) {
        void stopProfile?.then((stop) => stop(process.env.HOP_PROFILE!));
      }
    }
  }
  return emit.call(this, event, ...args);
} as typeof emit;
for (const proto of [Writable.prototype, Socket.prototype]) {
  const write = proto.write;
  proto.write = function (this: Writable, chunk: unknown, ...rest: unknown[]) {
    const mark = typeof chunk === "string" && chunk.startsWith('{"type":"rpc_result"') && chunk.length < 8000;
    if (mark) marks.writeIn.push(now());
    // deno-lint-ignore no-explicit-any
    const result = (write as any).call(this, chunk, ...rest);
    if (mark) marks.writeOut.push(now());
    return result;
  } as typeof write;
}
process.on("exit", () => {
  if (process.env.HOP_MARKS) writeFileSync(process.env.HOP_MARKS, JSON.stringify(marks));
});
const { main } = await import("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
