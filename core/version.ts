/**
 * The codemode version, kept in one place (mirrors package.json).
 * @module
 */

/** The codemode version. */
export const VERSION = "0.1.0";
