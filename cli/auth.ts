/**
 * `codemode auth login <server> [--no-browser]`, `auth status [--json]`, `auth logout <server>`: OAuth for
 * the remote MCP servers in the user's configs. Nothing here ever prints a token.
 * @module
 */
import type { ServerSpec } from "../core/contracts/discovery.ts";
import { OAuthClients, usesOAuth } from "../core/auth/clients.ts";
import { login, loginRefusal } from "../core/auth/login.ts";
import { logout } from "../core/auth/logout.ts";
import { loginCommand } from "../core/auth/needs_login.ts";
import { cliConfig } from "./_config.ts";
import { colors, mark, printJson, table } from "./_render.ts";
import { escapeDeep } from "./_terminal_guard.ts";
import { USAGE_ERROR } from "./exit_codes.ts";

/** One server's login, as `auth status --json` prints it. */
export interface AuthStatusRow {
  server: string;
  loggedIn: boolean;
  /** ISO time the access token expires; null when unknown or not logged in. */
  expiresAt: string | null;
  scopes: string[];
}

/** Runs `codemode auth login`; exit 0 when logged in, 1 when the login failed, 2 for an unknown server. */
export async function authLogin(name: string, opts: { browser?: boolean }): Promise<number> {
  const config = await cliConfig();
  const spec = findServer(config.discovery.servers, name);
  if (!spec) return USAGE_ERROR;
  const refusal = loginRefusal(spec);
  if (refusal) {
    process.stderr.write(`codemode: ${refusal}\n`);
    return 1;
  }
  const oauth = new OAuthClients(config.settings.stateDir, config.settings.oauthDir);
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  try {
    const result = await login(spec, {
      store: oauth.store,
      signal: controller.signal,
      notice: (message) => process.stderr.write(`codemode: ${message}\n`),
      authorize: async (url) => {
        if (opts.browser === false) {
          process.stderr.write(
            `To log in to "${spec.name}", open this URL in a browser:\n\n  ${url.href}\n\n`,
          );
        } else {
          process.stderr.write(
            `Opening a browser to log in to "${spec.name}". If none opens, visit:\n\n  ${url.href}\n\n`,
          );
          await openBrowser(url.href);
        }
        process.stderr.write(
          "Waiting for the browser to come back (up to 5 minutes; Ctrl-C to give up)...\n",
        );
      },
    });
    const scopes = result.scopes.length ? `scopes: ${result.scopes.join(" ")}` : "no scopes reported";
    const expiry = result.expiresAt
      ? `; the access token expires ${when(result.expiresAt)}${
        result.refreshable ? " and refreshes itself" : ""
      }`
      : "";
    process.stdout.write(`Logged in to "${spec.name}" (${scopes}${expiry}).\n`);
    return 0;
  } catch (error) {
    process.stderr.write(
      `codemode: the login to "${spec.name}" failed: ${(error as Error).message ?? error}\n`,
    );
    return 1;
  } finally {
    process.off("SIGINT", stop);
    await config.close();
  }
}

/** Runs `codemode auth status`: every remote server codemode logs in to, from the stored credentials. */
export async function authStatus(opts: { json?: boolean }): Promise<number> {
  const config = await cliConfig();
  const oauth = new OAuthClients(config.settings.stateDir, config.settings.oauthDir);
  const rows: AuthStatusRow[] = [];
  for (const spec of config.discovery.servers.filter(usesOAuth)) {
    const record = await oauth.store.read(spec.name, spec.url!);
    const tokens = record?.tokens;
    rows.push({
      server: spec.name,
      loggedIn: Boolean(tokens?.access_token || tokens?.refresh_token),
      expiresAt: tokens && record?.expiresAt ? new Date(record.expiresAt).toISOString() : null,
      scopes: tokens?.scope?.split(/\s+/).filter(Boolean) ?? [],
    });
  }
  await config.close();
  if (opts.json) {
    printJson(rows);
    return 0;
  }
  if (!rows.length) {
    process.stdout.write("No remote MCP server that logs in with OAuth is configured.\n");
    return 0;
  }
  const c = colors();
  process.stdout.write(
    table(
      ["", "server", "logged in", "access token expires", "scopes"],
      escapeDeep(rows).map((r) => [
        mark(r.loggedIn ? "ok" : "warn", c),
        r.server,
        r.loggedIn ? "yes" : `no: run ${loginCommand(r.server)}`,
        r.expiresAt ? when(new Date(r.expiresAt)) : "-",
        r.scopes.join(" ") || "-",
      ]),
      c,
    ) + "\n",
  );
  return 0;
}

/** Runs `codemode auth logout`: revokes where the server supports it and deletes the stored credentials. */
export async function authLogout(name: string): Promise<number> {
  const config = await cliConfig();
  const spec = findServer(config.discovery.servers, name);
  if (!spec) return USAGE_ERROR;
  try {
    const result = await logout(
      spec,
      new OAuthClients(config.settings.stateDir, config.settings.oauthDir).store,
    );
    if (!result.wasLoggedIn) {
      process.stdout.write(`Not logged in to "${spec.name}"; nothing to do.\n`);
    } else if (result.revoked) {
      process.stdout.write(
        `Logged out of "${spec.name}": ${result.revoked} token${result.revoked > 1 ? "s" : ""} revoked ` +
          `and the stored credentials deleted.\n`,
      );
    } else {
      process.stdout.write(
        `Logged out of "${spec.name}": the stored credentials were deleted, but nothing was revoked ` +
          `(${result.notRevoked}).\n`,
      );
    }
    return 0;
  } finally {
    await config.close();
  }
}

/** The configured server of that name; an unknown name is reported with the names that exist. */
function findServer(servers: ServerSpec[], name: string): ServerSpec | undefined {
  const spec = servers.find((s) => s.name === name);
  if (spec) return spec;
  const remote = servers.filter(usesOAuth).map((s) => `"${s.name}"`);
  process.stderr.write(
    `codemode: unknown MCP server "${name}"; remote servers that log in: ${remote.join(", ") || "none"} ` +
      `(see \`codemode servers\`)\n`,
  );
  return undefined;
}

/** Opens the system browser; a failure only means the user has to open the printed URL. */
async function openBrowser(url: string): Promise<void> {
  try {
    const { default: open } = await import("open");
    await open(url);
  } catch (error) {
    process.stderr.write(
      `codemode: could not open a browser (${(error as Error).message}); open the URL above\n`,
    );
  }
}

/** A time as "in 59 min" / "in 3 h" / "2 min ago". */
function when(date: Date, now = Date.now()): string {
  const ms = date.getTime() - now;
  const minutes = Math.round(Math.abs(ms) / 60_000);
  const span = minutes < 1
    ? "less than a minute"
    : minutes < 120
    ? `${minutes} min`
    : `${Math.round(minutes / 60)} h`;
  return ms >= 0 ? `in ${span}` : `${span} ago`;
}
