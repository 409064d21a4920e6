/** The skills suite on the embedded Pyodide runtime (see _skills_suite.ts). */
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { skillsSuite } from "./_skills_suite.ts";

const usable = (await pyodide().detect()).available;
if (!usable) console.warn("IGNORED skills suite on pyodide: deno or the Pyodide package is missing");
skillsSuite("pyodide", usable);
