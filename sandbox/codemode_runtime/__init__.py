"""The codemode sandbox runtime.

Transport-free core (runs under CPython and Pyodide alike):
  frames    JSON frame encoding with the size cap
  values    decoding of binary values that cross the channel
  rpc       calls into the host, awaited or blocking
  tracebacks  tracebacks that show only the user's frames
  executor  compile and run one cell in the persistent namespace, inside the session's running loop
  asyncio_run  top-level asyncio.run() / run_until_complete() rewritten to awaits; a clear error elsewhere
  job       one background job, and who output belongs to (the owner context variable, OutputRouter)
  jobs      background work between runs: start_job, tasks a run left running, their frames, the caps
  display   display(), rich values and figures as `display` frames, within the per-run cap
  figures   matplotlib: backend choice and font cache at first import, open figures shown and closed
  mpl_backend  the matplotlib backend (Agg; plt.show() displays), imported by matplotlib itself
  kernel    one session: namespace, proxies, API binding, frame handling
  context   the kernel the `mcp` package talks to
  output    output frames with the per-execution cap; FrameWriter stands in for sys.stdout
  artifacts files left in /workspace/artifacts, sent to the host at the end of each run
  files     files the host puts into the sandbox (file frames)
  embedded  in-process transport for hosts without threads or fds (Pyodide): EmbeddedSession

CPython process transport (threads, fds, signals; not available in Pyodide):
  channel   frames over private copies of stdin/stdout
  capture   fd 1 and 2 redirected into pipes and forwarded as output frames
  watchdog  per-execution timeout that interrupts the main thread
  process   the entry point the bootstrap calls: main(config, rest); runs the loop for good
"""
