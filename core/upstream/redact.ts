/**
 * Keeps the secrets in a server's configuration out of text that sandbox code can read. Error messages
 * quote what servers, HTTP bodies and fetch print, and those echo URLs, tokens and command lines.
 *
 * The rule, per server: secret are (1) every `env` value; (2) every header value, and the credential after
 * its scheme ("Bearer x" gives "x", Basic also gives the decoded user and password); (3) in the URL and in
 * URL-shaped args, the user, the password, every query value and every opaque path segment; (4) in args,
 * the value of a secret-named option (`--api-key=x`, `--token x`, `password=x`) and every opaque string.
 * A name is secret-named when it contains key, token, secret, password, passwd, pwd, auth, credential,
 * cookie, session or signature; opaque means 20 or more characters of letters, digits and `-_.+/=~`, with
 * both letters and digits, not a path; (5) the OAuth client secret of the config. Values shorter than 6
 * characters are left alone, so that redacting cannot mangle common words. Each secret is also redacted in
 * URL-encoded and JSON-escaped form.
 *
 * OAuth tokens are not in the config: the connection adds the ones codemode holds (`secretForms`). As a
 * last line, any `Bearer` or `DPoP` credential a message quotes is redacted whether it is known or not.
 * @module
 */
import type { CallToolResult } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";

/** What a redacted secret is replaced with. */
export const REDACTED = "[redacted]";
/** Values shorter than this are never treated as secrets. */
export const MIN_SECRET_LENGTH = 6;

const SECRET_NAME = /key|token|secret|passw|pwd|auth|credential|cookie|session|signature/i;
const OPAQUE = /^[A-Za-z0-9\-_.+/=~]{20,}$/;
/** An HTTP credential as messages quote it: the scheme, then a token-shaped value with a digit in it. */
const QUOTED_CREDENTIAL = /\b(Bearer|DPoP)\s+(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{16,}=*/gi;

/** The secret-bearing values of one server's configuration, longest first, each at most once. */
export function secretsOf(spec: Partial<ServerSpec>): string[] {
  const found: string[] = [];
  for (const value of Object.values(spec.env ?? {})) found.push(value);
  for (const value of Object.values(spec.headers ?? {})) found.push(...headerSecrets(value));
  if (spec.url) found.push(...urlSecrets(spec.url));
  found.push(...argSecrets(spec.args ?? []));
  if (spec.oauth?.clientSecret) found.push(spec.oauth.clientSecret);
  return secretForms(found);
}

/** Secret values in every form they are redacted in, longest first, each at most once. */
export function secretForms(values: readonly unknown[]): string[] {
  const secrets = new Set<string>();
  for (const value of values) {
    if (typeof value !== "string" || value.length < MIN_SECRET_LENGTH) continue;
    for (const form of forms(value)) secrets.add(form);
  }
  return [...secrets].sort((a, b) => b.length - a.length);
}

/** `text` with every occurrence of every secret, and any quoted bearer credential, replaced by `[redacted]`. */
export function redact(text: string, secrets: readonly string[]): string {
  let result = text;
  // Longest first, so a secret containing another is replaced whole.
  for (const secret of secrets) {
    if (secret.length >= MIN_SECRET_LENGTH) result = result.replaceAll(secret, REDACTED);
  }
  return result.replace(QUOTED_CREDENTIAL, `$1 ${REDACTED}`);
}

/**
 * A tool's error result with its text redacted: servers' error texts quote the request they refused,
 * credentials included. Other results are returned untouched (they are the tool's data).
 */
export function redactToolError(result: CallToolResult, secrets: readonly string[]): CallToolResult {
  if (!result.isError || !Array.isArray(result.content)) return result;
  let changed = false;
  const content = result.content.map((item) => {
    if (item.type !== "text" || typeof item.text !== "string") return item;
    const text = redact(item.text, secrets);
    if (text === item.text) return item;
    changed = true;
    return { ...item, text };
  });
  return changed ? { ...result, content } : result;
}

/** Whether an option or variable name suggests its value is a credential. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

/** Whether a value looks like a generated token rather than a word, a number or a path. */
export function looksOpaque(value: string): boolean {
  if (!OPAQUE.test(value) || value.startsWith("/") || value.startsWith(".")) return false;
  return /[A-Za-z]/.test(value) && /[0-9]/.test(value);
}

function headerSecrets(value: string): string[] {
  const found = [value];
  const match = /^\s*(\S+)\s+(\S.*?)\s*$/.exec(value);
  if (!match) return found;
  const [, scheme, credential] = match;
  found.push(credential);
  if (scheme.toLowerCase() === "basic") {
    try {
      const decoded = atob(credential);
      const colon = decoded.indexOf(":");
      found.push(decoded, ...(colon >= 0 ? [decoded.slice(0, colon), decoded.slice(colon + 1)] : []));
    } catch {
      // Not base64: the credential itself is already listed.
    }
  }
  return found;
}

function urlSecrets(text: string): string[] {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return [];
  }
  const found = [decode(url.username), decode(url.password)];
  // Both as parsed and as written: the URL parser percent-encodes a query differently from
  // encodeURIComponent, and error messages quote the URL as the parser wrote it.
  for (const [, value] of url.searchParams) found.push(value);
  for (const pair of url.search.slice(1).split("&")) found.push(pair.slice(pair.indexOf("=") + 1));
  for (const segment of url.pathname.split("/")) {
    if (looksOpaque(decode(segment))) found.push(decode(segment));
  }
  if (url.hash.length > 1 && looksOpaque(url.hash.slice(1))) found.push(url.hash.slice(1));
  return found;
}

function argSecrets(args: readonly string[]): string[] {
  const found: string[] = [];
  args.forEach((arg, i) => {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(arg)) found.push(...urlSecrets(arg));
    const option = /^-{0,2}([A-Za-z0-9_.-]+)[=:](.+)$/s.exec(arg);
    if (option && isSecretName(option[1])) found.push(option[2]);
    else if (option && looksOpaque(option[2])) found.push(option[2]);
    const next = args[i + 1];
    const flag = /^-{1,2}[A-Za-z0-9_.-]+$/.test(arg) && isSecretName(arg);
    if (flag && next !== undefined && !next.startsWith("-")) found.push(next);
    if (looksOpaque(arg)) found.push(arg);
  });
  return found;
}

/** The raw value and how it looks URL-encoded, form-encoded and inside a JSON string. */
function forms(value: string): string[] {
  return [
    value,
    encodeURIComponent(value),
    new URLSearchParams({ v: value }).toString().slice(2),
    JSON.stringify(value).slice(1, -1),
  ];
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Tool arguments as JSON for a person to read (the dashboard): the values of secret-named keys
 * (`api_key`, `password`, ...) are replaced, and so is every configured secret of the server found in any
 * value. Arguments that cannot be serialised are described instead.
 */
export function redactArguments(args: unknown, secrets: readonly string[]): string {
  let json: string;
  try {
    json = JSON.stringify(args, (key, value) =>
      key && isSecretName(key) && (typeof value === "string" || typeof value === "number")
        ? REDACTED
        : value) ??
      "null";
  } catch (error) {
    return `[arguments not shown: ${(error as Error).message}]`;
  }
  return redact(json, secrets);
}
