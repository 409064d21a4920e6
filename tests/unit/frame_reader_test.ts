import assert from "node:assert/strict";
import { readFrames } from "../../core/sandbox/frame_reader.ts";

function streamOf(...chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(typeof chunk === "string" ? enc.encode(chunk) : chunk);
      c.close();
    },
  });
}

async function collect(stream: ReadableStream<Uint8Array>, max = 1024) {
  const lines: string[] = [];
  const dropped: number[] = [];
  for await (const line of readFrames(stream, max, (n) => dropped.push(n))) lines.push(line);
  return { lines, dropped };
}

Deno.test("readFrames() joins lines split across chunks and splits chunks holding several lines", async () => {
  const { lines } = await collect(streamOf('{"a":', '1}\n{"b":2}\n{"c"', ":3}\n"));
  assert.deepEqual(lines, ['{"a":1}', '{"b":2}', '{"c":3}']);
});

Deno.test("readFrames() drops a line over the cap whole and keeps reading after it", async () => {
  const big = "x".repeat(5000);
  const { lines, dropped } = await collect(
    streamOf("ok1\n", big.slice(0, 2000), big.slice(2000) + "\nok2\n"),
  );
  assert.deepEqual(lines, ["ok1", "ok2"]);
  assert.deepEqual(dropped, [5000]);
});

Deno.test("readFrames() reports an oversized unterminated tail and yields a short one", async () => {
  assert.deepEqual((await collect(streamOf("tail"))).lines, ["tail"]);
  const { lines, dropped } = await collect(streamOf("y".repeat(3000)));
  assert.deepEqual(lines, []);
  assert.deepEqual(dropped, [3000]);
});

Deno.test("readFrames() keeps multi-byte characters split across chunks intact", async () => {
  const bytes = new TextEncoder().encode("héllo→\n");
  const { lines } = await collect(streamOf(bytes.subarray(0, 2), bytes.subarray(2, 7), bytes.subarray(7)));
  assert.deepEqual(lines, ["héllo→"]);
});
