/**
 * The vocabulary every doctor check reports in: a status, and the findings the summary lists.
 * @module
 */

/** How healthy one checked thing is; only "fail" makes doctor exit non-zero. */
export type CheckStatus = "ok" | "warn" | "fail" | "info";

/** One line of the summary: a non-ok finding with its fix. */
export interface Finding {
  status: CheckStatus;
  subject: string;
  message: string;
  fix?: string;
}
