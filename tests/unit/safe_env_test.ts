import assert from "node:assert/strict";
import { safeEnv, serverEnv } from "../../core/upstream/safe_env.ts";

const host = {
  PATH: "/usr/bin",
  HOME: "/home/u",
  LANG: "C.UTF-8",
  LC_ALL: "C.UTF-8",
  TMPDIR: "/tmp",
  GITHUB_TOKEN: "ghp_secret",
  AWS_SECRET_ACCESS_KEY: "aws",
  OPENAI_API_KEY: "sk",
  BASH_FUNC_x: "() { echo; }",
  SHELL: "() { evil; }",
  EMPTY: undefined,
};

Deno.test("safeEnv() keeps the allow-list and LC_* and drops everything else", () => {
  assert.deepEqual(safeEnv(host, "linux"), {
    PATH: "/usr/bin",
    HOME: "/home/u",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    TMPDIR: "/tmp",
  });
});

Deno.test("safeEnv() matches Windows names case-insensitively and adds the Windows list", () => {
  const env = safeEnv({ Path: "C:\\bin", SystemRoot: "C:\\Windows", APPDATA: "x", TOKEN: "t" }, "win32");
  assert.deepEqual(env, { Path: "C:\\bin", SystemRoot: "C:\\Windows", APPDATA: "x" });
  assert.deepEqual(safeEnv({ SystemRoot: "C:\\Windows" }, "linux"), {});
});

Deno.test("serverEnv() puts the server's configured env over the safe base", () => {
  assert.deepEqual(serverEnv({ env: { PATH: "/opt/bin", API_KEY: "mine" } }, host, "linux"), {
    PATH: "/opt/bin",
    HOME: "/home/u",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    TMPDIR: "/tmp",
    API_KEY: "mine",
  });
});
