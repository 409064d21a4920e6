/**
 * The tracing part of `codemode doctor`: whether runs are traced, where their spans go (and which
 * variable said so), and whether the collector there answers: one export of no spans, with the exporter's
 * own headers and TLS settings, so nothing is stored.
 * @module
 */
import type { Problem } from "../contracts/runtime.ts";
import { exportTarget, probeCollector, shownUrl } from "../observe/trace.ts";
import type { CheckStatus, Finding } from "./finding.ts";

/** The tracing section of the report. */
export interface TracingCheck {
  on: boolean;
  /** Where spans go (without credentials), and the variable that says so. */
  url?: string;
  from?: string;
  /** CODEMODE_TRACE_CONTENT: code, arguments and results in spans too. */
  content: boolean;
  /** Whether the collector answered, and in how long. */
  answered?: boolean;
  ms?: number;
  status: CheckStatus;
  problem?: Problem;
}

/** Asks the collector whether it takes an export; never throws. */
export type CollectorProbe = (url: string) => Promise<{ ok: boolean; ms: number; error?: string }>;

/** Checks tracing as `settings` and the OTEL_* variables in `env` set it up. */
export async function checkTracing(
  settings: { otlpEndpoint?: string; traceContent: boolean },
  env: Record<string, string | undefined>,
  probe: CollectorProbe = (url) => probeCollector(url, 5_000),
): Promise<TracingCheck> {
  const target = exportTarget(settings.otlpEndpoint, env);
  const content = settings.traceContent;
  if (!target) return { on: false, content, status: "info" };
  const url = shownUrl(target.url);
  const answer = await probe(target.url).catch((error) => ({ ok: false, ms: 0, error: String(error) }));
  const base = { on: true, url, from: target.from, content, answered: answer.ok, ms: answer.ms };
  if (answer.ok) return { ...base, status: "ok" };
  return {
    ...base,
    status: "warn",
    problem: {
      message: `The OTLP collector at ${url} (${target.from}) did not take an export: ${answer.error}`,
      fix: "Start the collector or correct the URL (and OTEL_EXPORTER_OTLP_HEADERS if it wants a token); " +
        "runs work meanwhile, their spans are dropped",
    },
  };
}

/** The finding a collector that did not answer makes (a warning: runs are unaffected). */
export function tracingFindings(check: TracingCheck | undefined): Finding[] {
  return check?.problem ? [{ status: check.status, subject: "tracing", ...check.problem }] : [];
}
