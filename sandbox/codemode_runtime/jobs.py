"""Background work that keeps running between runs: jobs started with `runtime.start_job()`, and plain
asyncio tasks a run left running (they become jobs when that run ends).

Cells run inside the session's event loop, which keeps running between runs, so a task goes on after
its run returned. Who output belongs to is told by a context variable, `owner`: a run's code runs with
its Run (output goes to the run while it is active), a job's code with its Job (output always goes to the
job). A task inherits the context it was created in, so a task a run left behind still names that run;
once the run has ended, what it prints goes to the job it was adopted as, never to a later run.

The host hears about each job in `job` frames (started, ended) and its output in `job_output` frames
(batched, capped); calls into the host made by a job carry its id. The host treats all of it as untrusted.
Transport-free: the loop may be CPython's or Pyodide's.
"""
import asyncio
import contextvars
import inspect
import itertools
import threading

from . import context as kernel_context
from .job import Job, owner

DEFAULT_MAX_JOBS = 16
FINISHED_KEPT = 50
"""Finished jobs `runtime.jobs()` keeps listing (the newest)."""
_FLUSH_SECONDS = 0.2
_ERROR_CHARS = 4000


class Jobs:
    """One session's jobs. `send(frame)` reaches the host; `call_in_loop(callback, *args)` runs a callback
    on the loop's thread; `describe(exc)` formats a job's error as the run's tracebacks are; `threads` says
    whether plain functions may run in threads (not in Pyodide)."""

    def __init__(self, send, loop, call_in_loop, *, max_jobs=DEFAULT_MAX_JOBS, describe=None, threads=True):
        self.loop = loop
        self.call_in_loop = call_in_loop
        self.max_jobs = max(1, int(max_jobs or DEFAULT_MAX_JOBS))
        self.threads = threads
        self._send = send
        self._describe = describe or (lambda exc: f"{type(exc).__name__}: {exc}")
        self._ids = itertools.count(1)
        self._jobs = {}
        self._by_task = {}
        self._waiting = set()
        self._flush_armed = False
        self._flush_lock = threading.Lock()
        self._owners = None
        if not hasattr(asyncio.Task, "get_context"):  # Python 3.11: record each task's owner at creation
            self._owners = _TaskOwners(loop)

    @property
    def live(self):
        """How many jobs are running."""
        return sum(1 for job in self._jobs.values() if not job.done())

    def run_context(self, run):
        """A context whose code belongs to `run` (the run's task is created in it)."""
        context = contextvars.copy_context()
        context.run(owner.set, run)
        return context

    def start(self, work, name=None):
        """`runtime.start_job()`: runs a coroutine, an async function (called with no arguments) or a plain
        function (in a thread) in the background and returns its Job at once."""
        self._check_room()
        if asyncio.iscoroutine(work):
            label, make = getattr(work, "__qualname__", None), None
        elif callable(work):
            label = getattr(work, "__name__", None)
            make = "call" if inspect.iscoroutinefunction(work) or _returns_coroutine(work) else "thread"
            if make == "thread" and not self.threads:
                raise RuntimeError(
                    "This sandbox (Pyodide) has no threads, so a plain function cannot run in the background: "
                    "pass an async function or a coroutine to runtime.start_job()"
                )
        else:
            raise TypeError(
                f"runtime.start_job() takes a coroutine, an async function or a function, not {type(work).__name__}"
            )
        job = Job(self, f"job-{next(self._ids)}", str(name if name is not None else label or "job"), "job")
        context = contextvars.copy_context()
        context.run(owner.set, job)
        if make is None:
            body = work
        elif make == "call":
            body = context.run(work)
        else:
            body = self._in_thread(job, work, context.copy())  # a context is entered by one thread at a time
        job._task = self.loop.create_task(self._drive(job, body), context=context)
        # A job cancelled before its first step never enters _drive: its end is noted here.
        job._task.add_done_callback(lambda task: self._task_done(job, task, body))
        self._register(job)
        return job

    def list(self):
        """`runtime.jobs()`: every live job and the latest finished ones, oldest first."""
        return [job.info() for job in self._jobs.values()]

    async def wait(self, job, timeout=None):
        """`await runtime.wait(job)`: the job's value, or its error raised (CancelledError when cancelled).
        A timeout raises TimeoutError and leaves the job running. Displays the job kept are shown here."""
        job = self.resolve(job)
        waiter = asyncio.shield(job._future)
        if timeout is None:
            await waiter
        else:
            try:
                await asyncio.wait_for(waiter, timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(
                    f"Job {job.id} ({job.name!r}) is still running after {timeout:g}s; it goes on running"
                ) from None
        for rep in job.take_displays():
            kernel_context.current().display.show(rep)
        if job.state == "cancelled":
            raise asyncio.CancelledError(job.error or f"Job {job.id} was cancelled")
        if job.exception is not None:
            raise job.exception
        return job.value

    def resolve(self, job):
        """A Job from a Job, an asyncio task or a job id."""
        if isinstance(job, Job):
            return job
        if isinstance(job, str) and job in self._jobs:
            return self._jobs[job]
        if isinstance(job, asyncio.Task):
            known = self._by_task.get(job)
            if known is not None:
                return known
            adopted = self.adopt(job)
            if adopted is not None:
                return adopted
        raise ValueError(f"Not a job of this session: {job!r}")

    def job_here(self):
        """The job the running code belongs to, or None when it is the active run's (or nobody's)."""
        who = owner.get()
        if who is None:
            return None
        if type(who) is Job:
            return who
        if who.active:
            return None
        if asyncio._get_running_loop() is not self.loop:
            return None
        task = asyncio.current_task(self.loop)
        return self._by_task.get(task) if task is not None else None

    def run_ended(self, run, own_task=None):
        """Called when `run`'s code is over: tasks it left running become jobs (or are cancelled beyond
        CODEMODE_MAX_JOBS); returns a note about that, or None."""
        run.active = False
        left = [task for task in asyncio.all_tasks(self.loop)
                if task is not own_task and not task.done() and task not in self._by_task
                and self._owner_of(task) is run]
        cancelled = []
        for task in sorted(left, key=lambda t: t.get_name()):
            if self.live >= self.max_jobs:
                task.cancel("over CODEMODE_MAX_JOBS")
                cancelled.append(task.get_name())
            else:
                self.adopt(task)
        if cancelled:
            return (f"cancelled {len(cancelled)} task(s) the run left running ({', '.join(cancelled[:5])}): "
                    f"{self.max_jobs} background jobs are the most a session may run (CODEMODE_MAX_JOBS)")
        return None

    def adopt(self, task):
        """Lists a plain asyncio task as a job (by its task name) until it ends."""
        if task.done() or task in self._by_task:
            return self._by_task.get(task)
        job = Job(self, f"job-{next(self._ids)}", task.get_name(), "task")
        job._task = task
        self._register(job)
        task.add_done_callback(lambda t: self._task_done(job, t))
        return job

    def cancel_from_host(self, job_id, reason):
        """The host's cancel (its CODEMODE_MAX_JOB_TIME ran out, or the session is ending)."""
        job = self._jobs.get(job_id)
        if job is not None:
            job.cancel(str(reason or "cancelled by the host"))

    def output_waiting(self, job):
        """A job has output for the host: it goes out within _FLUSH_SECONDS, batched."""
        with self._flush_lock:
            self._waiting.add(job)
            if self._flush_armed:
                return
            self._flush_armed = True
        self.call_in_loop(self.loop.call_later, _FLUSH_SECONDS, self.flush)

    def flush(self):
        """Sends the output every job has queued."""
        with self._flush_lock:
            waiting, self._waiting, self._flush_armed = self._waiting, set(), False
        for job in sorted(waiting, key=lambda j: j.started):
            self._flush_job(job)

    def ended(self, job):
        """A job finished: its output and its end go to the host."""
        self._flush_job(job)
        frame = {"type": "job", "id": job.id, "name": job.name, "kind": job.kind, "state": job.state,
                 "seconds": round(job.seconds, 3), "tool_calls": job.tool_calls}
        if job.error:
            frame["error"] = _clip(job.error)
        if job.dropped:
            frame["dropped"] = job.dropped
        self._safe_send(frame)
        finished = [j for j in self._jobs.values() if j.done()]
        for old in finished[: max(0, len(finished) - FINISHED_KEPT)]:
            self._jobs.pop(old.id, None)

    def _register(self, job):
        self._jobs[job.id] = job
        if job._task is not None:
            self._by_task[job._task] = job
        self._safe_send({"type": "job", "id": job.id, "name": job.name, "kind": job.kind, "state": "running"})

    def _check_room(self):
        if self.live >= self.max_jobs:
            raise RuntimeError(
                f"{self.max_jobs} background jobs are running in this session, the most it may run "
                "(CODEMODE_MAX_JOBS): wait for one with `await runtime.wait(job)` or cancel one with job.cancel()"
            )

    async def _drive(self, job, body):
        try:
            value = await body
            if asyncio.iscoroutine(value):  # a plain function that returned a coroutine: run it here
                value = await value
        except asyncio.CancelledError:
            job._finish("cancelled", error=job._cancel_reason or "cancelled")
        except BaseException as exc:  # noqa: BLE001 - a job may raise anything; it must not stop the loop
            job._finish("failed", exception=exc, error=self._describe(exc))
        else:
            job._finish("done", value=value)
        finally:
            self._by_task.pop(job._task, None)

    def _in_thread(self, job, function, context):
        """A coroutine that runs `function` in a thread of its own (in `context`) and returns its value."""
        future = self.loop.create_future()

        def deliver(outcome, value):
            if future.done():
                return
            if outcome == "value":
                future.set_result(value)
            else:
                future.set_exception(value)

        def run():
            try:
                value = context.run(function)
            except BaseException as exc:  # noqa: BLE001 - reported as the job's error
                self._thread_done(deliver, "error", exc)
            else:
                self._thread_done(deliver, "value", value)
            finally:
                job._thread = None

        thread = threading.Thread(target=run, name=f"codemode-{job.id}", daemon=True)
        job._thread = thread
        thread.start()
        return future

    def _thread_done(self, deliver, outcome, value):
        try:
            self.loop.call_soon_threadsafe(deliver, outcome, value)
        except RuntimeError:  # the loop is closed: the session is ending
            pass

    def _task_done(self, job, task, body=None):
        self._by_task.pop(task, None)
        if inspect.iscoroutine(body) and inspect.getcoroutinestate(body) == inspect.CORO_CREATED:
            body.close()  # cancelled before it started: not "never awaited"
        if task.cancelled():
            job._finish("cancelled", error=job._cancel_reason or "cancelled")
            return
        exc = task.exception()  # retrieved, so asyncio does not log it to stderr as well
        if exc is not None:
            job._finish("failed", exception=exc, error=self._describe(exc))
        else:
            job._finish("done", value=task.result())

    def _owner_of(self, task):
        if self._owners is not None:
            return self._owners.get(task)
        try:
            return task.get_context().get(owner)
        except Exception:
            return None

    def _flush_job(self, job):
        for stream, text in job.take_output():
            self._safe_send({"type": "job_output", "id": job.id, "stream": stream, "data": text})

    def _safe_send(self, frame):
        try:
            self._send(frame)
        except Exception:  # the channel is gone (the session is ending) or a frame was over the cap
            pass


class _TaskOwners:
    """Where a task's context can't be read (Python 3.11): a task factory records each task's owner."""

    def __init__(self, loop):
        import weakref

        self._owners = weakref.WeakKeyDictionary()
        previous = loop.get_task_factory()

        def factory(loop, coro, **kwargs):
            context = kwargs.get("context")
            task = previous(loop, coro, **kwargs) if previous else asyncio.Task(coro, loop=loop, **kwargs)
            who = context.get(owner) if context is not None else owner.get()
            if who is not None:
                self._owners[task] = who
            return task

        loop.set_task_factory(factory)

    def get(self, task):
        return self._owners.get(task)


def _returns_coroutine(work):
    """functools.partial of an async function, or a callable object whose __call__ is async."""
    func = getattr(work, "func", None)
    call = getattr(type(work), "__call__", None)
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)


def _clip(text):
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "\n..."
