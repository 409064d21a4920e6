import assert from "node:assert/strict";
import { describeLibraries, LIBRARIES, parseLibraries } from "../../core/doctor/libraries.ts";

Deno.test("parseLibraries() reads versions and missing libraries; anything else tells nothing", () => {
  const line = JSON.stringify({
    numpy: "1.24.2",
    pandas: "1.5.3",
    matplotlib: "",
    scipy: null,
    "scikit-learn": null,
    sympy: null,
    pillow: "9.4.0",
  });
  const libraries = parseLibraries(line)!;
  assert.deepEqual(Object.keys(libraries), LIBRARIES.map((l) => l.name));
  assert.equal(
    describeLibraries(libraries),
    "numpy 1.24.2, pandas 1.5.3, matplotlib, pillow 9.4.0; missing scipy, scikit-learn, sympy",
  );
  for (const bad of [undefined, "", "{}", "[1]", "not json", JSON.stringify({ numpy: "1" })]) {
    assert.equal(parseLibraries(bad), undefined, String(bad));
  }
  const none = Object.fromEntries(LIBRARIES.map((l) => [l.name, null]));
  assert.equal(
    describeLibraries(none),
    "none of numpy, pandas, matplotlib, scipy, scikit-learn, sympy, pillow",
  );
});
