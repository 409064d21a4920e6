/**
 * Which data-science libraries the sandbox image has: part of doctor's sandbox probe, found from inside a
 * real sandbox without importing any of them (a module spec and the installed version only).
 * @module
 */

/** The libraries the default image ships, by the name people know them by, with their module. */
export const LIBRARIES: readonly { name: string; module: string }[] = [
  { name: "numpy", module: "numpy" },
  { name: "pandas", module: "pandas" },
  { name: "matplotlib", module: "matplotlib" },
  { name: "scipy", module: "scipy" },
  { name: "scikit-learn", module: "sklearn" },
  { name: "sympy", module: "sympy" },
  { name: "pillow", module: "PIL" },
];

/** Each library's version ("" when unknown), or null when the sandbox lacks it. */
export type Libraries = Record<string, string | null>;

/** Python that prints one JSON line: {name: version | "" | null} for every library in {@link LIBRARIES}. */
export const LIBRARIES_PROGRAM = `
def _codemode_libraries():
    import importlib.metadata, importlib.util
    found = {}
    for name, module in ${JSON.stringify(LIBRARIES.map((l) => [l.name, l.module]))}:
        try:
            present = importlib.util.find_spec(module) is not None
        except Exception:
            present = False
        version = None
        if present:
            try:
                version = importlib.metadata.version(name)
            except Exception:
                version = ""
        found[name] = version
    return found
try:
    print(__import__("json").dumps(_codemode_libraries()))
except Exception:
    print("{}")
`;

/** Reads the libraries line; undefined when it tells nothing. */
export function parseLibraries(line: string | undefined): Libraries | undefined {
  let facts: unknown;
  try {
    facts = JSON.parse(line ?? "");
  } catch {
    return undefined;
  }
  if (!facts || typeof facts !== "object") return undefined;
  const libraries: Libraries = {};
  for (const { name } of LIBRARIES) {
    const value = (facts as Record<string, unknown>)[name];
    if (value === undefined) return undefined;
    libraries[name] = typeof value === "string" ? value : null;
  }
  return libraries;
}

/** "numpy 1.24.2, pandas 1.5.3, ..." and what is missing, for doctor's text report. */
export function describeLibraries(libraries: Libraries): string {
  const present = LIBRARIES.filter((l) => libraries[l.name] !== null)
    .map((l) => libraries[l.name] ? `${l.name} ${libraries[l.name]}` : l.name);
  const missing = LIBRARIES.filter((l) => libraries[l.name] === null).map((l) => l.name);
  if (!present.length) return `none of ${missing.join(", ")}`;
  return present.join(", ") + (missing.length ? `; missing ${missing.join(", ")}` : "");
}
