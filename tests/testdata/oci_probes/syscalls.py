# Tries each kernel interface a sandboxed program should not reach and prints one JSON object:
# {"arch", "seccomp", "seccomp_filters", "results": {probe: outcome}}. An outcome is "ok" (the call
# succeeded), an errno name ("EPERM", "ENOSYS", "EINVAL", ...) or "killed:SIGSYS" and the like.
# Arguments are chosen so that a call the filter lets through either succeeds harmlessly or fails inside
# the kernel with an errno of its own; each probe runs in a forked child, so a namespace it enters or a
# personality it sets cannot change the next probe. x86_64 only (the syscall numbers are x86_64's).
import ctypes, errno, json, os, platform, signal, struct, sys

if platform.machine() != "x86_64":
    print(json.dumps({"arch": platform.machine(), "error": "the probe knows x86_64 syscall numbers only"}))
    sys.exit(0)

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
keep = []  # buffers whose addresses are passed to the kernel stay alive until the probe ends


def ptr(data):
    """The address of a fresh buffer holding `data` (bytes) or `data` zero bytes (int)."""
    b = ctypes.create_string_buffer(data, len(data) + 1) if isinstance(data, bytes) else ctypes.create_string_buffer(data)
    keep.append(b)
    return ctypes.addressof(b)


def call(nr, *args):
    """Raw syscall; returns the result, raising OSError with the errno on -1."""
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if result == -1:
        raise OSError(ctypes.get_errno(), "")
    return result


def clone_and_reap(nr, *args):
    """A raw clone/clone3 that forks: the child leaves at once, the parent reaps it."""
    pid = call(nr, *args)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


AT_FDCWD = -100
SIGCHLD = 17
NEWNS, NEWCGROUP, NEWUTS, NEWIPC = 0x20000, 0x02000000, 0x04000000, 0x08000000
NEWUSER, NEWPID, NEWNET, NEWTIME = 0x10000000, 0x20000000, 0x40000000, 0x80
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_SESSION_KEYRING = -2, -3
PROT_RWX, MAP_PRIVATE_ANON = 7, 0x22


def perf_attr():
    # struct perf_event_attr (VER0 size 64): PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, user space only.
    flags = (1 << 0) | (1 << 5) | (1 << 6)  # disabled, exclude_kernel, exclude_hv
    return ptr(struct.pack("IIQQQQQ", 1, 64, 1, 0, 0, 0, flags) + bytes(8))


def userns_chain(then):
    """unshare(CLONE_NEWUSER) first: inside the new user namespace the process holds every capability."""
    call(272, NEWUSER)
    then()


def compat_int80():
    # 32-bit getpid (i386 number 20) through int 0x80 from a 64-bit process: mov eax, 20; int 0x80; ret.
    libc.mmap.restype = ctypes.c_void_p
    page = libc.mmap(None, 4096, PROT_RWX, MAP_PRIVATE_ANON, -1, 0)
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
    ctypes.memmove(page, code, len(code))
    result = ctypes.CFUNCTYPE(ctypes.c_int)(page)()
    if result < 0:
        raise OSError(-result, "")
    if result != os.getpid():
        raise OSError(errno.EIO, "unexpected pid")


PROBES = {
    # namespaces: a new user namespace makes every capability check inside it pass
    "unshare(NEWUSER)": lambda: call(272, NEWUSER),
    "unshare(NEWNS)": lambda: call(272, NEWNS),
    "unshare(NEWNET)": lambda: call(272, NEWNET),
    "unshare(NEWUTS)": lambda: call(272, NEWUTS),
    "unshare(NEWIPC)": lambda: call(272, NEWIPC),
    "unshare(NEWPID)": lambda: call(272, NEWPID),
    "unshare(NEWCGROUP)": lambda: call(272, NEWCGROUP),
    "unshare(NEWTIME)": lambda: call(272, NEWTIME),
    "clone(NEWUSER)": lambda: clone_and_reap(56, NEWUSER | SIGCHLD, 0, 0, 0, 0),
    "clone(NEWNET)": lambda: clone_and_reap(56, NEWNET | SIGCHLD, 0, 0, 0, 0),
    "clone(NEWNS)": lambda: clone_and_reap(56, NEWNS | SIGCHLD, 0, 0, 0, 0),
    "clone(NEWPID)": lambda: clone_and_reap(56, NEWPID | SIGCHLD, 0, 0, 0, 0),
    "clone3()": lambda: clone_and_reap(435, ptr(struct.pack("11Q", 0, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)), 88),
    "setns(-1)": lambda: call(308, -1, 0),
    "userns+unshare(NEWNS|NEWNET)": lambda: userns_chain(lambda: call(272, NEWNS | NEWNET)),
    "userns+mount(tmpfs)": lambda: userns_chain(
        lambda: (call(272, NEWNS), call(165, ptr(b"none"), ptr(b"/tmp"), ptr(b"tmpfs"), 0, 0))
    ),
    "userns+netlink(NETFILTER)": lambda: userns_chain(
        lambda: (call(272, NEWNET), call(41, 16, 3, 12))
    ),
    # mounts and the new mount API
    "mount(tmpfs)": lambda: call(165, ptr(b"none"), ptr(b"/tmp"), ptr(b"tmpfs"), 0, 0),
    "umount2(/tmp)": lambda: call(166, ptr(b"/tmp"), 0),
    "pivot_root": lambda: call(155, ptr(b"/"), ptr(b"/")),
    "chroot(/)": lambda: call(161, ptr(b"/")),
    "fsopen(tmpfs)": lambda: call(430, ptr(b"tmpfs"), 0),
    "fsconfig(-1)": lambda: call(431, -1, 0, 0, 0, 0),
    "fsmount(-1)": lambda: call(432, -1, 0, 0),
    "fspick(/)": lambda: call(433, AT_FDCWD, ptr(b"/"), 0),
    "move_mount(-1)": lambda: call(429, -1, ptr(b""), -1, ptr(b""), 0),
    "open_tree(/)": lambda: call(428, AT_FDCWD, ptr(b"/"), 0),
    "mount_setattr(-1)": lambda: call(442, -1, ptr(b""), 0, 0, 0),
    # kernel subsystems with a history of privilege-escalation bugs
    "io_uring_setup": lambda: call(425, 1, ptr(120)),
    "io_uring_enter(-1)": lambda: call(426, -1, 0, 0, 0, 0, 0),
    "io_uring_register(-1)": lambda: call(427, -1, 0, 0, 0),
    "keyctl(GET_KEYRING_ID)": lambda: call(250, 0, KEY_SPEC_SESSION_KEYRING, 0),
    "add_key(user)": lambda: call(248, ptr(b"user"), ptr(b"codemode-probe"), ptr(b"x"), 1, KEY_SPEC_PROCESS_KEYRING),
    "request_key(user)": lambda: call(249, ptr(b"user"), ptr(b"codemode-probe-none"), 0, 0),
    "bpf(MAP_CREATE)": lambda: call(321, 0, ptr(72), 72),
    "perf_event_open(self)": lambda: call(298, perf_attr(), 0, -1, -1, 0),
    "userfaultfd(USER_MODE_ONLY)": lambda: call(323, 1 | os.O_CLOEXEC),
    "memfd_secret": lambda: call(447, 0),
    "vmsplice(-1)": lambda: call(278, -1, 0, 0, 0),
    "seccomp(GET_ACTION_AVAIL)": lambda: call(317, 2, 0, ptr(struct.pack("I", 0x7FFF0000))),
    "landlock_create_ruleset(VERSION)": lambda: call(444, 0, 0, 1),
    "io_setup(aio)": lambda: call(206, 1, ptr(8)),
    "name_to_handle_at(/)": lambda: call(303, AT_FDCWD, ptr(b"/"), ptr(struct.pack("Ii", 0, 0)), ptr(4), 0),
    "open_by_handle_at(-1)": lambda: call(304, -1, ptr(struct.pack("Ii", 8, 1) + bytes(8)), 0),
    "fanotify_init(REPORT_FID)": lambda: call(300, 0x200, 0),
    "lookup_dcookie": lambda: call(212, 0, ptr(64), 64),
    "pkey_alloc": lambda: call(330, 0, 0),
    "mbind": lambda: call(237, 0, 0, 0, 0, 0, 0),
    "set_mempolicy(DEFAULT)": lambda: call(238, 0, 0, 0),
    "move_pages(self)": lambda: call(279, 0, 0, 0, 0, 0, 0),
    "migrate_pages(self)": lambda: call(256, 0, 0, 0, 0),
    # other processes' memory
    "ptrace(TRACEME)": lambda: call(101, 0, 0, 0, 0),
    "process_vm_readv(self)": lambda: call(310, os.getpid(), 0, 0, 0, 0, 0),
    "process_vm_writev(self)": lambda: call(311, os.getpid(), 0, 0, 0, 0, 0),
    "kcmp(self)": lambda: call(312, os.getpid(), os.getpid(), 0, 0, 0),
    "pidfd_getfd(-1)": lambda: call(438, -1, 0, 0),
    "process_madvise(-1)": lambda: call(440, -1, 0, 0, 0, 0),
    # machine-wide state, guarded by capabilities the sandbox does not hold
    "kexec_load": lambda: call(246, 0, 0, 0, 0),
    "kexec_file_load": lambda: call(320, -1, -1, 0, 0, 0),
    "init_module": lambda: call(175, 0, 0, ptr(b"")),
    "finit_module(-1)": lambda: call(313, -1, ptr(b""), 0),
    "delete_module": lambda: call(176, ptr(b"codemode_none"), 0),
    "swapon": lambda: call(167, ptr(b"/tmp/none"), 0),
    "swapoff": lambda: call(168, ptr(b"/tmp/none")),
    "reboot(bad magic)": lambda: call(169, 0, 0, 0, 0),
    "acct(NULL)": lambda: call(163, 0),
    "settimeofday": lambda: call(164, ptr(16), 0),
    "clock_settime": lambda: call(227, 0, ptr(16)),
    "sethostname": lambda: call(170, ptr(b"x"), 1),
    "iopl(3)": lambda: call(172, 3),
    "ioperm": lambda: call(173, 0x80, 1, 1),
    "vhangup": lambda: call(153),
    "quotactl(Q_SYNC)": lambda: call(179, 0x800001, 0, 0, 0),
    "quotactl_fd(-1)": lambda: call(443, -1, 0, 0, 0),
    "nfsservctl": lambda: call(180, 0, 0, 0),
    "syslog(SIZE_BUFFER)": lambda: call(103, 10, 0, 0),
    "sync": lambda: call(162),
    "mknod(char device)": lambda: call(133, ptr(b"/tmp/codemode-null"), 0o20666, os.makedev(1, 3)),
    # legacy and execution-domain interfaces
    "personality(READ_IMPLIES_EXEC)": lambda: call(135, 0x0400000),
    "personality(ADDR_NO_RANDOMIZE)": lambda: call(135, 0x0040000),
    "modify_ldt(read)": lambda: call(154, 0, ptr(16), 16),
    "uselib": lambda: call(134, ptr(b"/none")),
    "ustat": lambda: call(136, 0, ptr(32)),
    "sysfs": lambda: call(139, 3),
    "32-bit int 0x80": compat_int80,
    "x32 getpid": lambda: call(0x40000000 | 39),
    # socket families beyond unix, inet and routing netlink
    "socket(AF_PACKET)": lambda: call(41, 17, 3, 0),
    "socket(AF_ALG)": lambda: call(41, 38, 5, 0),
    "socket(AF_VSOCK)": lambda: call(41, 40, 1, 0),
    "socket(AF_KEY)": lambda: call(41, 15, 3, 2),
    "socket(AF_TIPC)": lambda: call(41, 30, 2, 0),
    "socket(AF_RDS)": lambda: call(41, 21, 5, 0),
    "socket(AF_XDP)": lambda: call(41, 44, 3, 0),
    "socket(AF_BLUETOOTH)": lambda: call(41, 31, 3, 0),
    "netlink(NETFILTER)": lambda: call(41, 16, 3, 12),
    "netlink(XFRM)": lambda: call(41, 16, 3, 6),
    "netlink(AUDIT)": lambda: call(41, 16, 3, 9),
    "netlink(KOBJECT_UEVENT)": lambda: call(41, 16, 3, 15),
    "netlink(SOCK_DIAG)": lambda: call(41, 16, 3, 4),
}


def run(probe):
    """Runs one probe in a forked child and returns its outcome."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        signal.alarm(5)
        try:
            PROBES[probe]()
            outcome = "ok"
        except OSError as e:
            outcome = errno.errorcode.get(e.errno, str(e.errno))
        except Exception as e:  # a bug in the probe, not a kernel answer
            outcome = "probe error: " + repr(e)
        os.write(write_end, outcome.encode())
        os._exit(0)
    os.close(write_end)
    outcome = os.read(read_end, 1000).decode()
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed:" + signal.Signals(os.WTERMSIG(status)).name
    return outcome


status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
only = sys.argv[1:]
print(json.dumps({
    "arch": platform.machine(),
    "uid": os.getuid(),
    "seccomp": status.get("Seccomp", "").strip(),
    "seccomp_filters": status.get("Seccomp_filters", "").strip(),
    "results": {name: run(name) for name in PROBES if not only or name in only},
}))
