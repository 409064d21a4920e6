/**
 * The HTTP guard: which Host, Origin and Authorization headers pass, and which addresses count as
 * loopback or wildcard.
 */
import assert from "node:assert/strict";
import {
  allowedHostsFor,
  guardRequest,
  isLoopbackHost,
  isWildcardHost,
} from "../../core/serve/http_guard.ts";

const local = { allowedHosts: allowedHostsFor("127.0.0.1") };

Deno.test("a loopback Host with or without a port passes, and no Origin passes", () => {
  for (const host of ["127.0.0.1:8765", "localhost:1", "[::1]:8765", "localhost"]) {
    assert.equal(guardRequest({ host }, local), undefined, host);
  }
});

Deno.test("a foreign or missing Host is refused with 403 naming it", () => {
  const refused = guardRequest({ host: "attacker.example:8765" }, local);
  assert.equal(refused?.status, 403);
  assert.match(refused!.message, /Refused Host "attacker\.example:8765"/);
  assert.equal(guardRequest({}, local)?.status, 403);
  // DNS rebinding: the name resolves to 127.0.0.1, but the browser still sends the attacker's name.
  assert.equal(guardRequest({ host: "127.0.0.1.attacker.example" }, local)?.status, 403);
});

Deno.test("a foreign, opaque or malformed Origin is refused; a loopback Origin passes", () => {
  const host = "127.0.0.1:8765";
  for (
    const origin of ["http://attacker.example", "null", "not a url", "https://localhost.attacker.example"]
  ) {
    assert.equal(guardRequest({ host, origin }, local)?.status, 403, origin);
  }
  for (const origin of ["http://localhost:6274", "http://127.0.0.1", "http://[::1]:3000"]) {
    assert.equal(guardRequest({ host, origin }, local), undefined, origin);
  }
});

Deno.test("with a token, only the exact bearer token passes, and a refusal says how to authenticate", () => {
  const options = { ...local, token: "s3cret" };
  const host = "localhost:8765";
  assert.equal(guardRequest({ host, authorization: "Bearer s3cret" }, options), undefined);
  assert.equal(guardRequest({ host, authorization: "bearer s3cret" }, options), undefined);
  for (const authorization of [undefined, "", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret"]) {
    const refused = guardRequest({ host, authorization }, options);
    assert.equal(refused?.status, 401, String(authorization));
    assert.match(refused!.headers!["WWW-Authenticate"], /^Bearer/);
  }
});

Deno.test("a server bound to a LAN address also answers to that address; a wildcard bind to any Host", () => {
  const lan = { allowedHosts: allowedHostsFor("192.168.1.20") };
  assert.equal(guardRequest({ host: "192.168.1.20:8765" }, lan), undefined);
  assert.equal(guardRequest({ host: "10.0.0.1:8765" }, lan)?.status, 403);
  assert.deepEqual(allowedHostsFor("::1"), ["localhost", "127.0.0.1", "[::1]"]);
  const any = { allowedHosts: allowedHostsFor("0.0.0.0"), token: "t" };
  assert.equal(any.allowedHosts, undefined);
  assert.equal(guardRequest({ host: "whatever:1", authorization: "Bearer t" }, any), undefined);
  // Browsers' cross-site requests stay refused even then.
  assert.equal(
    guardRequest({ host: "x", origin: "http://attacker.example", authorization: "Bearer t" }, any)?.status,
    403,
  );
});

Deno.test("loopback and wildcard addresses are told apart", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) assert.ok(isLoopbackHost(h), h);
  for (const h of ["0.0.0.0", "::", "192.168.1.2", "example.com", "128.0.0.1"]) {
    assert.ok(!isLoopbackHost(h), h);
  }
  for (const h of ["0.0.0.0", "::", "[::]", ""]) assert.ok(isWildcardHost(h), h);
  assert.ok(!isWildcardHost("127.0.0.1"));
});
