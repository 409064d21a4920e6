import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { settingDocs } from "../../core/config/settings.ts";

Deno.test("README's settings table matches the settings the code accepts", () => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const table = readme.split("<!-- settings-table:start -->")[1].split("<!-- settings-table:end -->")[0];
  const rows = table.trim().split("\n").slice(2);
  const expected = settingDocs().map((s) =>
    `| \`${s.env}\` | ${s.aliases.map((a) => `\`${a}\``).join(", ") || "-"} | ${
      s.fallback === undefined ? "-" : `\`${s.fallback}\``
    } | ${s.doc} |`
  );
  assert.deepEqual(rows, expected);
});
