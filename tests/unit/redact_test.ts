import assert from "node:assert/strict";
import { isSecretName, looksOpaque, redact, REDACTED, secretsOf } from "../../core/upstream/redact.ts";
import { explainCallFailure } from "../../core/upstream/errors.ts";
import { UpstreamOutputLog } from "../../core/upstream/output_log.ts";
import { setLogLevel, setLogSink } from "../../core/observe/log.ts";

const TOKEN = "tok-3f9a1c2e-77b0-4d2e-9c1a";

Deno.test("every env value of a server is a secret", () => {
  const secrets = secretsOf({ env: { GITHUB_TOKEN: TOKEN, MODE: "production" } });
  assert.ok(secrets.includes(TOKEN));
  assert.ok(secrets.includes("production"));
});

Deno.test("values shorter than six characters are left alone so common words survive", () => {
  const secrets = secretsOf({ env: { DEBUG: "1", LEVEL: "info" } });
  assert.deepEqual(secrets, []);
  assert.equal(redact("info: 1 line", secrets), "info: 1 line");
});

Deno.test("a header's whole value and its credential after the scheme are secrets, not the scheme", () => {
  const secrets = secretsOf({ headers: { Authorization: `Bearer ${TOKEN}`, "X-Api-Key": "abcdef123" } });
  assert.ok(secrets.includes(`Bearer ${TOKEN}`) && secrets.includes(TOKEN) && secrets.includes("abcdef123"));
  assert.equal(redact("got Bearer header", secrets), "got Bearer header");
  assert.equal(redact(`invalid credentials Bearer ${TOKEN}`, secrets), `invalid credentials ${REDACTED}`);
});

Deno.test("a Basic credential also yields its decoded user and password", () => {
  const secrets = secretsOf({ headers: { Authorization: `Basic ${btoa("alice-admin:hunter22x")}` } });
  assert.ok(secrets.includes("alice-admin") && secrets.includes("hunter22x"));
});

Deno.test("a URL's user, password, query values and opaque path segments are secrets, its host is not", () => {
  const url = `https://bob-user:pa55word@mcp.example.com/v1/${TOKEN}Abc123/sse?key=${TOKEN}&region=europe`;
  const text = redact(`error sending request for url (${new URL(url).href})`, secretsOf({ url }));
  assert.equal(
    text,
    `error sending request for url (https://${REDACTED}:${REDACTED}@mcp.example.com/v1/${REDACTED}/sse?key=${REDACTED}&region=${REDACTED})`,
  );
});

Deno.test("a query value is redacted as the URL parser writes it, not only as encodeURIComponent does", () => {
  const url = "http://127.0.0.1:8080/mcp?key=a/b:c'd~secret";
  const href = new URL(url).href;
  assert.ok(!redact(href, secretsOf({ url })).includes("secret"), redact(href, secretsOf({ url })));
});

Deno.test("the values of secret-named options are secrets, in every spelling of the option", () => {
  const secrets = secretsOf({
    args: ["--api-key=k-value-1", "--token", "t-value-2", "PASSWORD=p-value-3", "-auth:a-value-4"],
  });
  for (const value of ["k-value-1", "t-value-2", "p-value-3", "a-value-4"]) {
    assert.ok(secrets.includes(value), value);
  }
});

Deno.test("ordinary arguments stay readable: paths, package names, words and flags", () => {
  const args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/alice/projects", "--verbose", "run"];
  const secrets = secretsOf({ args, command: "npx" });
  assert.deepEqual(secrets, []);
  assert.equal(redact("npx failed in /home/alice/projects", secrets), "npx failed in /home/alice/projects");
});

Deno.test("a boolean secret-named flag does not make the next flag a secret", () => {
  assert.deepEqual(secretsOf({ args: ["--no-auth", "--verbose"] }), []);
});

Deno.test("a long opaque argument is a secret even without a name", () => {
  const secrets = secretsOf({ args: ["serve", "ghp_a1B2c3D4e5F6g7H8i9J0kLmNoP"] });
  assert.deepEqual(secrets.filter((s) => s.startsWith("ghp_")), ["ghp_a1B2c3D4e5F6g7H8i9J0kLmNoP"]);
});

Deno.test("opaque means long, mixed letters and digits, and not a path", () => {
  assert.equal(looksOpaque("sk-live-4eC39HqLyjWDarjtT1zdp7dc"), true);
  assert.equal(looksOpaque("@modelcontextprotocol/server-everything"), false);
  assert.equal(looksOpaque("/usr/local/lib/node_modules/x1"), false);
  assert.equal(looksOpaque("abc123"), false);
  assert.equal(isSecretName("--api-key"), true);
  assert.equal(isSecretName("--verbose"), false);
});

Deno.test("URL-encoded and JSON-escaped forms of a secret are redacted too", () => {
  const secret = 'p@ss w"rd/42';
  const secrets = secretsOf({ env: { PASS: secret } });
  for (
    const form of [
      secret,
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
      "p%40ss+w%22rd%2F42",
    ]
  ) {
    assert.equal(redact(`x ${form} y`, secrets), `x ${REDACTED} y`, form);
  }
});

Deno.test("a secret containing another is redacted whole", () => {
  const secrets = secretsOf({ env: { A: "abcdef", B: "abcdefghij" } });
  assert.equal(redact("abcdefghij", secrets), REDACTED);
});

Deno.test("a server's stderr tail is redacted before it is clipped, so no part of a secret survives", () => {
  const secret = `s-${"x9".repeat(200)}`;
  const output = new UpstreamOutputLog("diag", secretsOf({ env: { DIAG_TOKEN: secret } }));
  output.stderr(`DIAG_TOKEN=${secret}`);
  assert.equal(output.tail(), `DIAG_TOKEN=${REDACTED}`);
});

Deno.test("a server's stderr and stdout noise reach the debug log only redacted", () => {
  const lines: string[] = [];
  setLogLevel("debug");
  setLogSink((line) => lines.push(line));
  try {
    const output = new UpstreamOutputLog("diag", secretsOf({ env: { DIAG_TOKEN: TOKEN } }));
    output.stderr(`env: DIAG_TOKEN=${TOKEN}`);
    output.noise(`stray ${TOKEN}`);
  } finally {
    setLogLevel("warn");
    setLogSink((line) => process.stderr.write(line + "\n"));
  }
  assert.equal(lines.length, 2);
  for (const line of lines) {
    assert.ok(!line.includes(TOKEN) && line.includes(REDACTED), line);
  }
});

Deno.test("a failed call's message quotes the server's error without its secrets, even past the clip", () => {
  const secret = `k-${"7a".repeat(400)}`;
  const error = explainCallFailure(new Error(`${"e".repeat(590)} invalid key ${secret}`), {
    server: "api",
    tool: "get",
    timeoutMs: 1000,
    remote: true,
    secrets: secretsOf({ headers: { "X-Key": secret } }),
  });
  assert.ok(!error.message.includes("7a7a"), error.message.slice(-80));
});

Deno.test("an exited server's message redacts the stderr tail and the end reason", () => {
  const error = explainCallFailure(new Error("closed"), {
    server: "api",
    tool: "get",
    timeoutMs: 1000,
    remote: true,
    ended: `lost the connection (fetch http://h/mcp?key=${TOKEN})`,
    stderrTail: `token ${TOKEN}`,
    secrets: secretsOf({ url: `http://h/mcp?key=${TOKEN}` }),
  });
  assert.ok(!error.message.includes(TOKEN) && error.message.includes(REDACTED), error.message);
});
