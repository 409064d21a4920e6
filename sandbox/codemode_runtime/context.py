"""The running kernel, as seen by the `mcp` package (set once, when a Kernel is created)."""

kernel = None
"""The active codemode_runtime.kernel.Kernel, or None before start-up."""


def current():
    """The active kernel; raises RuntimeError outside a codemode sandbox."""
    if kernel is None:
        raise RuntimeError("The codemode runtime is not running: the mcp package only works inside a sandbox")
    return kernel
