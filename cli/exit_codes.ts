/**
 * Exit codes every subcommand shares.
 * @module
 */

/** Exit code for usage errors (bad arguments, unknown options). */
export const USAGE_ERROR = 2;
