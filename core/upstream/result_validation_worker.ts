/**
 * The worker thread behind `ResultValidator` (result_validation.ts): compiles a tool's outputSchema with
 * the SDK's Ajv provider and checks one result against it per message. A server's schema may hold a
 * regular expression that backtracks for ever; here that costs this thread, which the host ends at its
 * deadline, never the host's event loop.
 * @module
 */
import { parentPort } from "node:worker_threads";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/client/validators/ajv";

/** A job: the schema travels with every job, compiled once per `schemaId`. */
export interface ValidationJob {
  id: number;
  schemaId: number;
  schema: unknown;
  value: unknown;
}

/** The answer to a job: no `error` means the value matches the schema. */
export interface ValidationAnswer {
  id: number;
  error?: string;
}

/** Compiled schemas kept; a server's schemas beyond this are compiled again when used. */
const MAX_COMPILED = 256;

type Check = (value: unknown) => { valid: boolean; errorMessage?: string };

const provider = new AjvJsonSchemaValidator();
const compiled = new Map<number, Check | string>();

function compile(schemaId: number, schema: unknown): Check | string {
  let entry = compiled.get(schemaId);
  if (entry === undefined) {
    try {
      entry = provider.getValidator(schema as Parameters<typeof provider.getValidator>[0]) as Check;
    } catch (error) {
      entry = `its outputSchema cannot be compiled: ${(error as Error).message ?? error}`;
    }
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(schemaId, entry);
  }
  return entry;
}

parentPort?.on("message", (job: ValidationJob) => {
  const check = compile(job.schemaId, job.schema);
  let error: string | undefined = typeof check === "string" ? check : undefined;
  if (typeof check !== "string") {
    try {
      const verdict = check(job.value);
      if (!verdict.valid) error = `it does not match the tool's outputSchema: ${verdict.errorMessage}`;
    } catch (failure) {
      error = `it could not be checked against the tool's outputSchema: ${(failure as Error).message}`;
    }
  }
  parentPort!.postMessage({ id: job.id, ...(error ? { error: error.slice(0, 2000) } : {}) });
});
parentPort?.postMessage({ ready: true });
