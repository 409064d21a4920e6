# A realistic sandbox workload, one check at a time: child processes, threads, asyncio, multiprocessing,
# /proc, files in /tmp, the standard library's data modules, sockets, polling, signals and timeouts. Prints
# one JSON object {check: "ok" | "error: ..."}; a check whose module the image lacks says "skipped: ...".
import json, os, signal, sys, time, traceback

checks = {}


def check(fn):
    try:
        result = fn()
        checks[fn.__name__] = "ok" if result is None else str(result)
    except ImportError as e:
        checks[fn.__name__] = "skipped: " + str(e)
    except BaseException as e:  # a KeyboardInterrupt from a stray alarm is a failure too
        checks[fn.__name__] = "error: " + "".join(traceback.format_exception_only(type(e), e)).strip()
    return fn


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


@check
def subprocess_shell_and_coreutils():
    import subprocess
    out = subprocess.run(
        ["sh", "-c", "echo hi > /tmp/w.txt && cat /tmp/w.txt && ls -la /tmp | head -3 >/dev/null && "
         "cp /tmp/w.txt /tmp/w2.txt && wc -c < /tmp/w2.txt && sort -r /etc/passwd | head -1 >/dev/null && "
         "date +%Y >/dev/null && id -u && stat -c %s /tmp/w.txt && mktemp -d >/dev/null && sleep 0.01 && "
         "find /tmp -maxdepth 1 -name 'w*' | wc -l && env | grep -c PATH && rm /tmp/w2.txt"],
        capture_output=True, text=True, timeout=30,
    )
    expect(out.returncode == 0, f"exit {out.returncode}: {out.stderr}")
    expect(out.stdout.split() == ["hi", "3", "65534", "3", "2", "1"], out.stdout)


@check
def subprocess_timeout_kills_the_child():
    import subprocess
    started = time.monotonic()
    try:
        subprocess.run(["sleep", "30"], timeout=0.5)
        raise AssertionError("no timeout")
    except subprocess.TimeoutExpired:
        pass
    expect(time.monotonic() - started < 10, "the timeout took too long")


@check
def subprocess_pipes_between_children():
    import subprocess
    producer = subprocess.Popen(["seq", "1", "1000"], stdout=subprocess.PIPE)
    consumer = subprocess.run(["tail", "-n", "1"], stdin=producer.stdout, capture_output=True, text=True)
    producer.stdout.close()
    expect(producer.wait() == 0 and consumer.stdout.strip() == "1000", consumer.stdout)


@check
def threads():
    import threading, concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda n: sum(range(n)), range(1000, 1016)))
    expect(results[0] == sum(range(1000)), "wrong sum")
    event = threading.Event()
    timer = threading.Timer(0.05, event.set)
    timer.start()
    expect(event.wait(5), "timer thread did not fire")
    lock, cond = threading.Lock(), threading.Condition()
    with lock, cond:
        cond.wait(0.01)


@check
def asyncio_tasks_streams_and_subprocesses():
    import asyncio, socket

    async def main():
        await asyncio.gather(*(asyncio.sleep(0.01) for _ in range(50)))
        proc = await asyncio.create_subprocess_exec("echo", "async", stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        expect(out == b"async\n", out)
        a, b = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=a)
        b.sendall(b"line\n")
        expect(await reader.readline() == b"line\n", "stream")
        writer.close()
        b.close()
        loop = asyncio.get_running_loop()
        expect(await loop.run_in_executor(None, sum, [1, 2]) == 3, "executor")
        try:
            await asyncio.wait_for(asyncio.sleep(10), 0.05)
        except asyncio.TimeoutError:
            pass
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def square(n):
    return n * n


@check
def multiprocessing_fork_and_spawn():
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(2) as pool:
        expect(pool.map(square, range(10)) == [n * n for n in range(10)], "fork pool")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=queue.put, args=("spawned",))
    proc.start()
    expect(queue.get(timeout=30) == "spawned", "spawn queue")
    proc.join(30)
    lock = multiprocessing.Lock()  # a POSIX semaphore in /dev/shm
    with lock:
        pass
    value = multiprocessing.Value("i", 41)
    value.value += 1
    expect(value.value == 42, "shared value")


@check
def proc_self():
    status = open("/proc/self/status").read()
    expect("Seccomp:" in status, "no Seccomp line")
    expect(len(open("/proc/self/maps").read()) > 0, "maps")
    expect(len(os.listdir("/proc/self/fd")) >= 3, "fds")
    expect(os.readlink("/proc/self/exe").endswith(("python3", "python3.11")) or True, "exe")
    open("/proc/self/cmdline").read()
    open("/proc/cpuinfo").read()
    open("/proc/meminfo").read()


@check
def files_in_tmp():
    import fcntl, mmap, shutil, tempfile
    with tempfile.NamedTemporaryFile("w+b", dir="/tmp") as f:
        f.write(b"x" * 100000)
        f.flush()
        os.fsync(f.fileno())
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with mmap.mmap(f.fileno(), 0) as m:
            expect(m[:1] == b"x", "mmap")
        shutil.copy(f.name, "/tmp/copy.bin")
    directory = tempfile.mkdtemp()
    os.rename("/tmp/copy.bin", os.path.join(directory, "moved.bin"))
    os.symlink(os.path.join(directory, "moved.bin"), os.path.join(directory, "link"))
    expect(os.path.getsize(os.path.join(directory, "link")) == 100000, "size")
    os.mkfifo(os.path.join(directory, "fifo"))
    os.utime(directory)
    os.chmod(directory, 0o700)
    os.statvfs("/tmp")
    shutil.rmtree(directory)
    with open("/workspace/out.txt", "w") as f:
        f.write("workspace")


@check
def data_modules():
    import json, zlib, hashlib, gzip, io, tarfile, csv, decimal, random, unicodedata
    blob = json.dumps({"a": list(range(1000))}).encode()
    expect(zlib.decompress(zlib.compress(blob)) == blob, "zlib")
    hashlib.sha256(blob).hexdigest(), hashlib.md5(blob).hexdigest(), hashlib.blake2b(blob).hexdigest()
    expect(gzip.decompress(gzip.compress(blob)) == blob, "gzip")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("a.json")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    csv.writer(io.StringIO()).writerow([1, 2])
    decimal.Decimal(1) / 3
    random.SystemRandom().random()
    os.urandom(32)
    unicodedata.name("a")


@check
def sqlite():
    import sqlite3
    db = sqlite3.connect("/tmp/w.db")
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    db.commit()
    expect(db.execute("select sum(x) from t").fetchone()[0] == 4950, "sum")
    db.close()


@check
def sockets_and_polling():
    import select, socket
    a, b = socket.socketpair()
    a.sendall(b"ping")
    expect(select.select([b], [], [], 5)[0] == [b], "select")
    poller = select.poll()
    poller.register(b, select.POLLIN)
    expect(poller.poll(5000), "poll")
    ep = select.epoll()
    ep.register(b.fileno(), select.EPOLLIN)
    expect(ep.poll(5), "epoll")
    expect(b.recv(4) == b"ping", "recv")
    ep.close()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname(), timeout=5)
    conn, _ = server.accept()
    client.sendall(b"tcp")
    expect(conn.recv(3) == b"tcp", "tcp")
    for s in (a, b, server, client, conn):
        s.close()
    udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    udp.close()
    socket.getaddrinfo("localhost", 80)
    expect([name for _, name in socket.if_nameindex()] == ["lo"], "interfaces")


@check
def signals_and_timers():
    fired = []
    signal.signal(signal.SIGALRM, lambda *_: fired.append("alarm"))
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    time.sleep(0.2)
    signal.signal(signal.SIGUSR1, lambda *_: fired.append("usr1"))
    os.kill(os.getpid(), signal.SIGUSR1)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    os.kill(os.getpid(), signal.SIGUSR2)
    expect(signal.sigtimedwait([signal.SIGUSR2], 1) is not None, "sigtimedwait")
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2])
    expect(fired == ["alarm", "usr1"], fired)
    import faulthandler
    faulthandler.dump_traceback_later(30)
    faulthandler.cancel_dump_traceback_later()


@check
def process_facts_and_limits():
    import resource, platform
    os.sched_getaffinity(0)
    os.cpu_count()
    platform.uname()
    os.getloadavg()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
    os.nice(0)
    os.getpriority(os.PRIO_PROCESS, 0)
    os.times()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    expect(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7, "fork exit status")


@check
def ctypes_calls_libc():
    import ctypes
    libc = ctypes.CDLL(None)
    expect(libc.getpid() == os.getpid(), "getpid")
    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda n: n + 1)
    expect(callback(41) == 42, "callback")


print(json.dumps(checks))
