/**
 * The error that travels back to the sandbox as a typed Python exception, and which Python type an error
 * surfaces as. Its own file so that what rpc.ts describes (the call context) may name any part of the API.
 * @module
 */

/** An error that reaches sandbox code as an exception of the named Python type (e.g. "ToolError"). */
export class RpcError extends Error {
  /** Creates an error raised in the sandbox as `pythonType`. */
  constructor(readonly pythonType: string, message: string) {
    super(message);
    this.name = "RpcError";
  }
}

/** The Python exception type an error should surface as. */
export function pythonErrorType(error: unknown): string {
  if (error instanceof RpcError) return error.pythonType;
  if (error instanceof Error && error.name === "ToolError") return "ToolError";
  if (error instanceof Error && error.name === "UpstreamTimeoutError") return "TimeoutError";
  // A remote server that needs `codemode auth login`: no retry from sandbox code can fix it.
  if (error instanceof Error && error.name === "UpstreamAuthError") return "PermissionError";
  return "RuntimeError";
}
