#!/usr/bin/env -S deno run -A
/**
 * The codemode command line.
 * @module
 */
import { main } from "./cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
