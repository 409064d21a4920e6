import assert from "node:assert/strict";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { FrameSplitter, readFrames } from "../../core/sandbox/frame_reader.ts";
import { socketLink } from "../../core/sandbox/frame_link.ts";

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

Deno.test("FrameSplitter returns the lines each chunk completes and keeps the rest for the next", () => {
  const dropped: number[] = [];
  const splitter = new FrameSplitter(8, (n) => dropped.push(n));
  const enc = new TextEncoder();
  assert.deepEqual(splitter.push(enc.encode('{"a"')), []);
  assert.deepEqual(splitter.push(enc.encode(":1}\n\nok\n0123456789")), ['{"a":1}', "", "ok"]);
  assert.deepEqual(splitter.push(enc.encode("abc\nlast")), []);
  assert.deepEqual(dropped, [13]);
  assert.equal(splitter.end(), "last");
  assert.equal(splitter.end(), undefined);
});

/** Both ends of a TCP connection on an ephemeral port of 127.0.0.1. */
async function socketPair(): Promise<{ ours: Socket; theirs: Socket; close: () => void }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  const ours = connect((server.address() as AddressInfo).port, "127.0.0.1");
  const theirs = await accepted;
  return { ours, theirs, close: () => (ours.destroy(), theirs.destroy(), server.close()) };
}

Deno.test("socketLink() writes frames, reads lines in order, and holds reading while a handler works", async () => {
  const { ours, theirs, close } = await socketPair();
  try {
    const link = socketLink(ours);
    const got: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const reading = link.read(
      (line) => {
        got.push(line);
        // The first line's handler holds the link: the lines after it wait, in order.
        if (line === "one") return held;
      },
      1024,
      () => {},
    );
    theirs.write("one\ntwo\nthr");
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(got, ["one"]);
    release();
    theirs.write("ee\n");
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(got, ["one", "two", "three"]);
    const received = new Promise<string>((resolve) => theirs.once("data", (d) => resolve(String(d))));
    await link.write('{"type":"shutdown"}');
    assert.equal(await received, '{"type":"shutdown"}\n');
    theirs.end("tail");
    ours.end();
    await reading;
    assert.deepEqual(got, ["one", "two", "three", "tail"]);
    await assert.rejects(link.write("x"), /closed/);
  } finally {
    close();
  }
});
