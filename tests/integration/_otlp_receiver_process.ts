/**
 * The test OTLP receiver (_otlp_receiver.ts) in a process of its own, for a test whose own event loop is
 * busy while spans should arrive: prints `{"url": ...}` once listening, then one JSON line per span
 * received, `{"at": <ms since the epoch when it arrived>, "name": ...}`.
 *
 *   deno run -A tests/integration/_otlp_receiver_process.ts
 * @module
 */
import { startOtlpReceiver } from "./_otlp_receiver.ts";

const receiver = await startOtlpReceiver();
console.log(JSON.stringify({ url: receiver.url }));
let seen = 0;
setInterval(() => {
  const at = Date.now();
  for (; seen < receiver.spans.length; seen++) {
    console.log(JSON.stringify({ at, name: receiver.spans[seen].name }));
  }
}, 5);
