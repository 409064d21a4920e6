/**
 * Shared pieces of the approval tests: a HOME whose servers have side effects worth asking about
 * (server-filesystem over a scratch dir, server-memory, and the unannotated notes server), and an SDK
 * client that declares elicitation and answers each question the way the test says, recording them.
 * @module
 */
import { Client, type ElicitRequest, type ElicitResult } from "@modelcontextprotocol/client";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakeHome, ROOT } from "./_serve.ts";

/** A test HOME and the places its servers write to. */
export interface ApprovalHome {
  home: string;
  /** The only directory server-filesystem may touch. */
  dir: string;
  /** Where the notes server appends. */
  notesFile: string;
  /** server-memory's graph. */
  memoryFile: string;
}

/** A HOME with filesystem, memory, notes (and everything, from fakeHome). */
export function approvalHome(): ApprovalHome {
  const dir = mkdtempSync(join(tmpdir(), "codemode-approvals-"));
  const notesFile = join(dir, "notes.txt");
  const home = fakeHome({
    filesystem: {
      command: "node",
      args: [join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), dir],
    },
    notes: {
      command: join(ROOT, "node_modules/.bin/deno"),
      args: ["run", "-A", "--quiet", join(ROOT, "tests/testdata/servers/notes_server.ts")],
      env: { NOTES_FILE: notesFile },
    },
  });
  return { home, dir, notesFile, memoryFile: join(home, "memory.jsonl") };
}

/** The question as the client received it. */
export type Question = ElicitRequest["params"] & { message: string };

/** How the client answers one question: a result, or a promise of one (the request's signal aborts when withdrawn). */
export type Reply = (question: Question, signal: AbortSignal) => ElicitResult | Promise<ElicitResult>;

/** Ready-made replies. */
export const reply = {
  approve: (scope: "once" | "session" = "once"): Reply => () => ({
    action: "accept",
    content: { approve: true, scope },
  }),
  refuse: (): Reply => () => ({ action: "accept", content: { approve: false, scope: "once" } }),
  decline: (): Reply => () => ({ action: "decline" }),
  cancel: (): Reply => () => ({ action: "cancel" }),
  /** Never answers; settles (as a cancel) only once the server withdraws the question. */
  never: (): Reply => (_q, signal) =>
    new Promise((resolve) => signal.addEventListener("abort", () => resolve({ action: "cancel" }))),
  /** Answers the first question with the first reply, the second with the second, and so on. */
  inTurn: (...replies: Reply[]): Reply => {
    let next = 0;
    return (q, signal) => replies[Math.min(next++, replies.length - 1)](q, signal);
  },
  /** Answers with `then` after `ms`. */
  after: (ms: number, then: Reply): Reply => async (q, signal) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return await then(q, signal);
  },
};

/** An SDK client that declares form elicitation and answers with `answer`, which tests swap. */
export interface AskingClient {
  client: Client;
  /** Every question so far, with when it arrived and when it was answered (ms, wall clock). */
  questions: { question: Question; at: number; answeredAt?: number }[];
  answer: Reply;
  /** The most questions that were open at once. */
  mostOpen(): number;
}

/** A client with the elicitation capability (form mode). */
export function askingClient(name = "approvals-tests", answer: Reply = reply.approve()): AskingClient {
  const client = new Client({ name, version: "1" }, { capabilities: { elicitation: { form: {} } } });
  let open = 0;
  let most = 0;
  const asking: AskingClient = { client, questions: [], answer, mostOpen: () => most };
  client.setRequestHandler("elicitation/create", async (request, ctx) => {
    const entry: AskingClient["questions"][number] = {
      question: request.params as Question,
      at: performance.timeOrigin + performance.now(),
    };
    asking.questions.push(entry);
    most = Math.max(most, ++open);
    try {
      return await asking.answer(entry.question, ctx.mcpReq.signal);
    } finally {
      open--;
      entry.answeredAt = performance.timeOrigin + performance.now();
    }
  });
  return asking;
}
