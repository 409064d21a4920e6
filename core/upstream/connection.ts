/**
 * One upstream MCP server as the pool sees it: started on first use, kept warm, shared by concurrent
 * callers, restarted on the next use after it dies, and turning every failure into an error that names
 * the server and the tool.
 * @module
 */
import {
  type CallToolResult,
  Client,
  InsufficientScopeError,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  specTypeSchemas,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type Tool,
  type Transport,
} from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import type { AuthState, ServerAuth } from "../auth/server_auth.ts";
import { log } from "../observe/log.ts";
import { redact, redactToolError, secretForms, secretsOf } from "./redact.ts";
import { serverEnv } from "./safe_env.ts";
import { stats } from "../observe/stats.ts";
import {
  explainCallFailure,
  needsLogin,
  unauthorizedAfterRefresh,
  UpstreamAuthError,
  UpstreamCallError,
  UpstreamCancelledError,
  UpstreamClosedError,
  UpstreamStartError,
} from "./errors.ts";
import { clip, UpstreamOutputLog } from "./output_log.ts";
import { type ExitInfo, UpstreamStdioTransport } from "./stdio_transport.ts";
import type { UpstreamSkillFile, UpstreamSkills } from "./skills.ts";
import { acceptAllValidator, checkToolResult, ResultValidator } from "./result_validation.ts";
import type { AdmittedTools, ToolCaps, ToolProblem } from "./tool_caps.ts";
import { listTools, MAX_LIST_PAGES } from "./listing.ts";

/** Lifecycle of one server. */
export type ServerState = "idle" | "starting" | "ready" | "failed" | "closed";

/** A snapshot of one server, for `codemode servers` and diagnostics. */
export interface ServerStatus {
  state: ServerState;
  /** Why the last start failed or the last session ended. */
  error?: string;
  /** When the current (or last) session became ready. */
  startedAt?: Date;
  /** Starts after the first one. */
  restarts: number;
  /** The stdio server's process id while it runs. */
  pid?: number;
  /** The transport in use; "sse" for an "http" server that fell back. */
  transport?: "stdio" | "http" | "sse";
  /** A remote server codemode logs in to: whether it holds working credentials or needs a login. */
  auth?: AuthState;
}

/** Limits for one connection. */
export interface ConnectionOptions {
  callTimeoutMs: number;
  startTimeoutMs: number;
  /** Largest single message accepted from a stdio server. */
  maxMessageBytes?: number;
  /** The caps on the tools a listing may bring in (default TOOL_CAPS). */
  toolCaps?: ToolCaps;
  /** Called when the server says its tool list changed (`notifications/tools/list_changed`). */
  onToolsChanged?: (server: string) => void;
}

/** Per-call options. */
export interface CallOptions {
  /** Overrides the server's timeout for this call. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

interface Session {
  client: Client;
  transport: Transport;
  kind: "stdio" | "http" | "sse";
  pid?: number;
  startedAt?: Date;
  /** How the connection ended, once it has. */
  ended?: string;
  /** The current listing after the caps: the tools kept and the problems found. */
  tools?: Promise<AdmittedTools>;
  /** The kept tools by name: a call's result is checked against its tool's outputSchema. */
  byName?: Map<string, Tool>;
  /** When the current listing was asked for, and whether the server has said since that it changed. */
  listedAt?: number;
  stale?: boolean;
  /** The skills the server publishes (skills extension). */
  skills?: UpstreamSkills;
}

const CLIENT_INFO = { name: "codemode", version: "0.1.0" };
/** A server that said its tools changed is listed again on next use, but at most this often. */
const RELIST_MS = 1000;

/** A lazily started, self-healing client connection to one MCP server. */
export class UpstreamConnection {
  /** The server's configuration. */
  readonly spec: ServerSpec;
  #options: ConnectionOptions;
  #state: ServerState = "idle";
  #error?: string;
  #starts = 0;
  #session?: Session;
  #starting?: Promise<Session>;
  /** The session being connected, so close() can stop a start midway. */
  #attempt?: Session;
  #stderr: UpstreamOutputLog;
  /** The config's secrets, redacted from every message this connection builds: those reach sandbox code. */
  #configSecrets: string[];
  /** OAuth for a remote server that does not send its own Authorization header. */
  #auth?: ServerAuth;
  #tokenSecrets: { held: readonly string[]; forms: string[] } = { held: [], forms: [] };
  /** Checks results against their tool's outputSchema, in a worker thread of this server's own. */
  #validator = new ResultValidator();

  /** `auth` logs the connection in with OAuth (a remote server without its own Authorization header). */
  constructor(spec: ServerSpec, options: ConnectionOptions, auth?: ServerAuth) {
    this.spec = spec;
    this.#options = options;
    this.#auth = auth;
    this.#configSecrets = secretsOf(spec);
    this.#stderr = new UpstreamOutputLog(spec.name, this.#configSecrets);
  }

  /** Where the server is in its lifecycle. */
  status(): ServerStatus {
    const session = this.#session;
    return {
      state: this.#state,
      ...(this.#error ? { error: this.#error } : {}),
      ...(session?.startedAt ? { startedAt: session.startedAt } : {}),
      restarts: Math.max(0, this.#starts - 1),
      ...(this.#state === "ready" && session?.pid ? { pid: session.pid } : {}),
      ...(session ? { transport: session.kind } : {}),
      ...(this.#auth ? { auth: this.#auth.state() } : {}),
    };
  }

  /** The server's tools, fetched once per session (all pages) and refreshed when it says they changed. */
  async listTools(): Promise<Tool[]> {
    return (await this.listing()).tools;
  }

  /** The server's tools that pass the caps (see tool_caps.ts), and why the others were left out. */
  async listing(): Promise<{ tools: Tool[]; problems: ToolProblem[] }> {
    const session = await this.#ready();
    if (!session.client.getServerCapabilities()?.tools) return { tools: [], problems: [] };
    // A server flooding list_changed gets listed again at most once per RELIST_MS.
    if (session.stale && Date.now() - (session.listedAt ?? 0) >= RELIST_MS) session.tools = undefined;
    if (!session.tools) [session.listedAt, session.stale] = [Date.now(), false];
    session.tools ??= listTools(session.client, { timeoutMs: this.#timeout(), caps: this.#options.toolCaps })
      .then((admitted) => {
        session.byName = new Map(admitted.tools.map((tool) => [tool.name, tool]));
        for (const p of admitted.problems) {
          log.info("upstream tool left out", { server: this.spec.name, tool: p.tool, problem: p.problem });
        }
        return admitted;
      })
      .catch(async (failure) => {
        session.tools = undefined;
        const error = await this.#loginNeeded(failure);
        this.#dropIfLost(session, error);
        throw this.#explain(error, session, "tools/list", this.#timeout());
      });
    return await session.tools;
  }

  /** Name and description of each skill the server publishes (skills extension); none if it has none. */
  async listSkills(): Promise<{ name: string; description: string }[]> {
    const session = await this.#ready();
    session.skills ??= await upstreamSkills(session.client);
    try {
      const skills = await session.skills.list(this.#timeout());
      return skills.map((s) => ({ name: s.frontmatter.name, description: s.frontmatter.description }));
    } catch (error) {
      throw this.#explain(await this.#loginNeeded(error), session, "skills/list", this.#timeout());
    }
  }

  /** One file of a published skill (`SKILL.md` by default), verified against the server's entry. */
  async readSkill(name: string, file?: string): Promise<UpstreamSkillFile & { files: string[] }> {
    const session = await this.#ready();
    session.skills ??= await upstreamSkills(session.client);
    try {
      const read = await session.skills.read(name, file, this.#timeout());
      return { ...read, files: await session.skills.files(name, this.#timeout()) };
    } catch (error) {
      if (error instanceof RangeError) {
        throw new RangeError(redact(`MCP server "${this.spec.name}" ${error.message}`, this.#secrets()));
      }
      throw this.#explain(await this.#loginNeeded(error), session, `skill ${name}`, this.#timeout());
    }
  }

  /** Calls one tool and returns the raw MCP result; failures are `UpstreamError`s. */
  async callTool(
    tool: string,
    args: Record<string, unknown>,
    options: CallOptions = {},
  ): Promise<CallToolResult> {
    const started = performance.now();
    let session: Session | undefined;
    const timeoutMs = this.#timeout(options.timeoutMs);
    try {
      session = await this.#readyUnlessAborted(tool, options.signal);
      const result = await send(session, tool, args, { timeout: timeoutMs, signal: options.signal });
      const invalid = await checkToolResult(this.#validator, session.byName?.get(tool), result);
      if (invalid) {
        throw new UpstreamCallError(
          `The result of "${tool}" on MCP server "${this.spec.name}" was refused: ${invalid}`,
          this.spec.name,
          tool,
        );
      }
      this.#called(tool, started, result.isError ? "tool_error" : "ok");
      return result.isError ? redactToolError(result, this.#secrets()) : result;
    } catch (failure) {
      if (!session || failure instanceof UpstreamCallError) {
        this.#called(tool, started, "error", failure);
        throw failure;
      }
      const error = await this.#loginNeeded(failure);
      if (!options.signal?.aborted) this.#dropIfLost(session, error);
      const explained = this.#explain(error, session, tool, timeoutMs, options.signal);
      this.#called(tool, started, "error", explained);
      throw explained;
    }
  }

  /** Stops the server (the whole process tree for stdio) and refuses further use. */
  async close(): Promise<void> {
    this.#state = "closed";
    this.#validator.close();
    const session = this.#session;
    this.#session = undefined;
    await Promise.allSettled([
      session && endSession(session),
      this.#attempt?.transport.close(),
      this.#starting,
    ]);
  }

  /** Counts one call and logs it (in the caller's log scope, so the line carries its request id). */
  #called(tool: string, started: number, outcome: "ok" | "tool_error" | "error", error?: unknown): void {
    const ms = performance.now() - started;
    stats.upstreamCall(this.spec.name, tool, ms, outcome);
    if (!log.enabled("debug")) return;
    const fields = { server: this.spec.name, tool, ms: Math.round(ms * 10) / 10, outcome };
    log.debug("upstream call", error ? { ...fields, error: this.#describe(error) } : fields);
  }

  /** The config's secrets and every OAuth credential held for the server, in all their forms. */
  #secrets(): string[] {
    if (!this.#auth) return this.#configSecrets;
    const held = this.#auth.secrets();
    if (held !== this.#tokenSecrets.held) {
      this.#tokenSecrets = { held, forms: secretForms([...this.#configSecrets, ...held]) };
    }
    return this.#tokenSecrets.forms.length ? this.#tokenSecrets.forms : this.#configSecrets;
  }

  /** A method, not a field read, because the state changes across awaits. */
  #closed(): boolean {
    return this.#state === "closed";
  }

  #timeout(override?: number): number {
    return override ?? this.spec.timeoutMs ?? this.#options.callTimeoutMs;
  }

  /** The live session, starting one if needed; concurrent callers share one start. */
  #ready(): Promise<Session> {
    if (this.#state === "closed") {
      return Promise.reject(
        new UpstreamClosedError(`MCP server "${this.spec.name}" is closed`, this.spec.name),
      );
    }
    if (this.#state === "ready" && this.#session && !this.#session.ended) {
      return Promise.resolve(this.#session);
    }
    this.#starting ??= this.#start().finally(() => (this.#starting = undefined));
    return this.#starting;
  }

  /** Waits for the session, but gives up as soon as the caller aborts (a start can take seconds). */
  #readyUnlessAborted(tool: string, signal?: AbortSignal): Promise<Session> {
    const ready = this.#ready();
    if (!signal) return ready;
    const cancelled = () => this.#cancelled(tool, signal.reason);
    if (signal.aborted) return Promise.reject(cancelled());
    return new Promise<Session>((resolve, reject) => {
      const onAbort = () => reject(cancelled());
      signal.addEventListener("abort", onAbort, { once: true });
      ready.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  #cancelled(tool: string, cause: unknown): UpstreamCancelledError {
    const name = this.spec.name;
    return new UpstreamCancelledError(
      `The call to "${tool}" on MCP server "${name}" was cancelled`,
      name,
      tool,
      {
        cause,
      },
    );
  }

  async #start(): Promise<Session> {
    this.#starts++;
    this.#state = "starting";
    this.#session = undefined;
    const previousError = this.#error;
    this.#error = undefined;
    this.#stderr.clear();
    const name = this.spec.name;
    const timeoutMs = this.#options.startTimeoutMs;
    let gaveUp = false;
    const connect = async (kind: Session["kind"]) => {
      if (gaveUp || this.#state === "closed") throw new Error("start abandoned");
      const attempt = this.#attempt = this.#open(kind);
      // The SDK's own handshake timeout is a backstop; the deadline below fires first and says more.
      try {
        await attempt.client.connect(attempt.transport, { timeout: timeoutMs + 1000 });
      } catch (error) {
        throw await this.#loginNeeded(error);
      }
      return attempt;
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`it did not finish the MCP handshake within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      // A server that needs a login fails here, before a client and transport are built for nothing.
      await this.#auth?.ensureUsable();
      const session = await Promise.race([deadline, this.#handshake(connect)]);
      if (this.#closed()) throw new Error("closed while starting");
      session.startedAt = new Date();
      session.pid = (session.transport as Partial<UpstreamStdioTransport>).pid;
      this.#session = session;
      this.#state = "ready";
      stats.upstreamStart(name, true);
      log.info("upstream server ready", { server: name, transport: session.kind, pid: session.pid });
      return session;
    } catch (error) {
      gaveUp = true;
      const failed = this.#attempt;
      // Read before closing: how it ended on its own, not the signal close() sends.
      const exit = (failed?.transport as Partial<UpstreamStdioTransport> | undefined)?.exit;
      await failed?.transport.close().catch(() => {});
      if (this.#closed()) {
        throw new UpstreamClosedError(`MCP server "${name}" was closed while starting`, name, undefined, {
          cause: error,
        });
      }
      const login = needsLogin(error);
      if (login) {
        const message = redact(login.message, this.#secrets());
        // Said once per reason: a loop calling a server that needs a login must not flood the log.
        if (previousError !== message) {
          log.warn("upstream server needs a login", { server: name, reason: message });
        }
        this.#state = "failed";
        this.#error = message;
        throw new UpstreamAuthError(message, name, undefined, { cause: error });
      }
      const reason = exit ? `it exited (${exitText(exit)}) before it was ready` : this.#describe(error);
      const tail = this.#stderr.tail();
      const message = redact(
        `MCP server "${name}" failed to start: ${reason}` +
          (tail ? `; its stderr ends with: ${tail}` : "") +
          `; check its command, arguments and environment with \`codemode doctor\``,
        this.#secrets(),
      );
      this.#state = "failed";
      this.#error = message;
      stats.upstreamStart(name, false);
      log.warn("upstream server failed to start", { server: name, error: message });
      throw new UpstreamStartError(message, name, undefined, { cause: error });
    } finally {
      this.#attempt = undefined;
      clearTimeout(timer);
    }
  }

  /** Connects by the configured transport; "http" falls back to SSE when Streamable HTTP is refused. */
  async #handshake(connect: (kind: Session["kind"]) => Promise<Session>): Promise<Session> {
    const kind = this.spec.transport;
    if (kind !== "http") return await connect(kind);
    try {
      return await connect("http");
    } catch (httpError) {
      // A server that wants a login wants it over SSE too.
      if (this.#state !== "starting" || needsLogin(httpError)) throw httpError;
      log.debug("streamable HTTP refused, trying SSE", {
        server: this.spec.name,
        error: this.#describe(httpError),
      });
      try {
        return await connect("sse");
      } catch (sseError) {
        if (needsLogin(sseError)) throw sseError;
        throw new Error(
          `Streamable HTTP failed (${describe(httpError)}) and SSE failed (${describe(sseError)})`,
        );
      }
    }
  }

  /**
   * `error`, or the NeedsLoginError it means: a 401 that survived the transport's refresh is a server
   * refusing this login, which puts it in the "needs login" state (see core/auth) instead of looking like
   * a lost connection or a failed start.
   */
  async #loginNeeded(error: unknown): Promise<unknown> {
    if (!this.#auth || !unauthorizedAfterRefresh(error)) return error;
    return await this.#auth.refusedAfterRefresh();
  }

  /** Builds an unconnected client and transport, wired so the session notices its own end. */
  #open(kind: Session["kind"]): Session {
    const spec = this.spec;
    let transport: Transport;
    if (kind === "stdio") {
      if (!spec.command) throw new Error(`no command configured`);
      transport = new UpstreamStdioTransport({
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd,
        env: serverEnv(spec),
        maxMessageBytes: this.#options.maxMessageBytes,
        onStderrLine: (line) => this.#stderr.stderr(line),
        onNoise: (line) => this.#stderr.noise(line),
      });
    } else {
      if (!spec.url) throw new Error(`no URL configured`);
      const url = new URL(spec.url);
      const requestInit = { headers: spec.headers ?? {} };
      // The transport asks for a token before each request and calls back on a 401; see core/auth.
      const auth = this.#auth ? { authProvider: this.#auth, fetch: this.#auth.fetch } : {};
      transport = kind === "http"
        ? new StreamableHTTPClientTransport(url, { requestInit, ...auth })
        : new SSEClientTransport(url, { requestInit, ...auth });
    }
    // The SDK's own output-schema check would run the server's patterns on this thread: see
    // result_validation.ts for the check that runs instead.
    const client = new Client(CLIENT_INFO, {
      listMaxPages: MAX_LIST_PAGES,
      jsonSchemaValidator: acceptAllValidator,
    });
    const session: Session = { client, transport, kind };
    transport.onclose = () => this.#ended(session);
    client.onerror = (error) =>
      log.debug("upstream protocol error", { server: spec.name, error: this.#describe(error) });
    client.setNotificationHandler("notifications/tools/list_changed", () => {
      session.stale = true;
      this.#options.onToolsChanged?.(spec.name);
    });
    client.setNotificationHandler("notifications/resources/list_changed", () => session.skills?.forget());
    return session;
  }

  #ended(session: Session): void {
    const exit = (session.transport as Partial<UpstreamStdioTransport>).exit;
    session.ended ??= exit ? `exited (${exitText(exit)})` : "closed the connection";
    this.#stderr.flush();
    if (session !== this.#session || this.#state !== "ready") return;
    this.#state = "failed";
    this.#error = `MCP server "${this.spec.name}" ${session.ended}`;
    log.warn("upstream server ended", { server: this.spec.name, how: session.ended });
  }

  /**
   * A remote transport failing under a call (server restarted and forgot our session, network cut) leaves
   * a session that can never work again; end it so the next call reconnects.
   */
  #dropIfLost(session: Session, error: unknown): void {
    // A login problem is not a lost connection: the session works again once the user logs in.
    if (
      session.kind === "stdio" || session.ended || error instanceof ProtocolError || needsLogin(error) ||
      error instanceof InsufficientScopeError
    ) {
      return;
    }
    const code = error instanceof SdkError ? error.code : undefined;
    if (code === SdkErrorCode.RequestTimeout || code === SdkErrorCode.InvalidResult) return;
    session.ended = `lost the connection (${clip(this.#describe(error).replace(/\s+/g, " "), 200)})`;
    void session.transport.close().catch(() => {});
    this.#ended(session);
  }

  /** Turns whatever the SDK threw into an `UpstreamError` that names the server and the tool. */
  #explain(error: unknown, session: Session, tool: string, timeoutMs: number, signal?: AbortSignal): Error {
    if (signal?.aborted) return this.#cancelled(tool, error);
    return explainCallFailure(error, {
      server: this.spec.name,
      tool,
      timeoutMs,
      ended: session.ended,
      remote: session.kind !== "stdio",
      stderrTail: this.#stderr.tail(),
      secrets: this.#secrets(),
    });
  }

  /** An error's message without this server's secrets (redacted before any clipping). */
  #describe(error: unknown): string {
    return redact(describe(error), this.#secrets());
  }
}

/** Closes a session; a Streamable HTTP one first tells the server to drop it, briefly and best-effort. */
async function endSession(session: Session): Promise<void> {
  const transport = session.transport;
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      transport.terminateSession().catch(() => {}),
      new Promise((resolve) => (timer = setTimeout(resolve, 1000))),
    ]);
    clearTimeout(timer);
  }
  await transport.close();
}

/**
 * Sends tools/call. `Client.callTool` adds header mirroring (modern era) and on every call probes the era
 * codec with a value that fails, building a zod error: about 80 µs of CPU. A legacy-era session needs none
 * of that, so its calls go through `request` with the spec's CallToolResult schema, which validates the
 * same shape. Neither path checks the outputSchema: `checkToolResult` does, off the event loop.
 */
function send(
  session: Session,
  tool: string,
  args: Record<string, unknown>,
  options: { timeout: number; signal?: AbortSignal },
): Promise<CallToolResult> {
  const params = { name: tool, arguments: args };
  if (session.client.getProtocolEra() === "legacy") {
    return session.client.request({ method: "tools/call", params }, specTypeSchemas.CallToolResult, options);
  }
  return session.client.callTool(params, options) as Promise<CallToolResult>;
}

/** A server's skills; the client side of the skills extension loads only when a listing is asked for. */
async function upstreamSkills(client: Client): Promise<UpstreamSkills> {
  const { UpstreamSkills } = await import("./skills.ts");
  return new UpstreamSkills(client);
}

function exitText(exit: ExitInfo): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
