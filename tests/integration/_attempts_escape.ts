/**
 * Escape attempts of the adversarial suite: reaching the network or the host, its files and devices,
 * and gaining privileges. Each program reports what it saw; the checks say what must hold.
 * @module
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { type Attempt, facts, hostProcessesOf, noneAllowed, refused } from "./_adversarial.ts";

/** Network: nothing leaves the sandbox, whatever the address family or trick. */
export const network: Attempt[] = [
  {
    area: "network",
    name: "TCP connections to every host address, the usual gateways and public IPs fail",
    code: `
targets = [(ip, FIX["tcp4Port"] if ":" not in ip else FIX["tcp6Port"]) for ip in FIX["hostIps"]]
targets += [("1.1.1.1", 443), ("8.8.8.8", 53), ("2606:4700:4700::1111", 443)]
report(results={f"{ip}:{port}": attempt(lambda: socket.create_connection((ip, port), timeout=2).close())
                for ip, port in targets})`,
    check(answer, { fix }) {
      noneAllowed(facts(answer).results, "TCP connections");
      assert.equal(fix.seen.tcp, 0, "a connection reached a host listener");
    },
  },
  {
    area: "network",
    name: "DNS lookups fail and no resolver is reachable",
    code: `
def udp_dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01", ("8.8.8.8", 53))
    s.recv(512)
report(results={
    "getaddrinfo": attempt(lambda: socket.getaddrinfo("example.com", 443)),
    "gethostbyname": attempt(lambda: socket.gethostbyname("pypi.org")),
    "udp_query": attempt(udp_dns),
})`,
    check(answer) {
      noneAllowed(facts(answer).results, "name lookups");
    },
  },
  {
    area: "network",
    name: "UDP datagrams to the host never arrive",
    code: `
results = {}
for ip in FIX["hostIps"]:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    port = FIX["udp6Port"] if ":" in ip else FIX["udp4Port"]
    def send():
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            for _ in range(3):
                s.sendto(b"escaped", (ip, port))
    results[ip] = attempt(send)
report(results=results)`,
    async check(answer, { fix }) {
      const results = facts(answer).results as Record<string, string>;
      // Loopback is the sandbox's own; every other destination must be unreachable.
      const outside = Object.fromEntries(
        Object.entries(results).filter(([ip]) => ip !== "127.0.0.1" && ip !== "::1"),
      );
      noneAllowed(outside, "UDP sends");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(fix.seen.udp, 0, "a datagram reached a host listener");
    },
  },
  {
    area: "network",
    name: "raw IP sockets cannot be opened",
    code: `
report(results={
    "icmp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
    "raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)),
    "icmpv6": attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)),
    "tcp_raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)),
})`,
    check(answer) {
      noneAllowed(facts(answer).results, "raw sockets");
    },
  },
  {
    area: "network",
    name: "AF_PACKET sockets cannot be opened",
    code: `
report(results={
    "raw": attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))),
    "dgram": attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3))),
})`,
    check(answer) {
      noneAllowed(facts(answer).results, "packet sockets");
    },
  },
  {
    area: "network",
    name: "netlink cannot change links, addresses or routes",
    code: `
def netlink(kind, flags, body):
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as s:
        s.settimeout(2)
        s.sendto(struct.pack("=IHHII", 16 + len(body), kind, flags | 0x1 | 0x4, 1, 0) + body, (0, 0))
        data = s.recv(65536)
    if struct.unpack("=H", data[4:6])[0] != 2:
        return "no ack"
    code = struct.unpack("=i", data[16:20])[0]
    return "allowed" if code == 0 else errno.errorcode.get(-code, str(-code))
create = 0x400 | 0x200
lo_down = struct.pack("=BxHiII", 0, 0, 1, 0, 1)
add_addr = struct.pack("=BBBBI", 2, 32, 0, 0, 1) + struct.pack("=HH", 8, 2) + socket.inet_aton("10.9.9.9")
add_route = struct.pack("=BBBBBBBBI", 2, 0, 0, 0, 254, 3, 253, 1, 0) + struct.pack("=HHi", 8, 4, 1)
report(results={
    "link": netlink(16, 0, lo_down),
    "address": netlink(20, create, add_addr),
    "route": netlink(24, create, add_route),
}, interfaces=sorted(os.listdir("/sys/class/net")))`,
    check(answer) {
      const f = facts(answer);
      // The kernel refuses the caller (EPERM on Linux, EACCES from gVisor's netstack): a denial either way.
      for (const [what, result] of Object.entries(f.results as Record<string, string>)) {
        assert.match(result, /^(EPERM|EACCES)$/, `netlink ${what}: ${result}`);
      }
      assert.deepEqual(f.interfaces, ["lo"]);
    },
  },
  {
    area: "network",
    name: "IPv6 reaches neither the host nor the internet",
    code: `
targets = [ip for ip in FIX["hostIps"] if ":" in ip and ip != "::1"] + ["2606:4700:4700::1111", "2001:4860:4860::8888"]
def connect(ip):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect((ip, FIX["tcp6Port"]))
report(results={ip: attempt(lambda: connect(ip)) for ip in targets},
       addresses=open("/proc/net/if_inet6").read().split("\\n") if os.path.exists("/proc/net/if_inet6") else [])`,
    check(answer, { fix }) {
      const f = facts(answer);
      noneAllowed(f.results, "IPv6 connections");
      const global = (f.addresses as string[]).filter((line) =>
        line && !line.startsWith("0".repeat(31) + "1")
      );
      assert.deepEqual(global, [], "the sandbox has an IPv6 address besides ::1");
      assert.equal(fix.seen.tcp, 0);
    },
  },
  {
    area: "network",
    name: "the engines' and the host's unix sockets are neither present nor reachable",
    code: `
paths = ["/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock",
         "/run/containerd/containerd.sock", "/run/dbus/system_bus_socket", "/run/systemd/private",
         "/run/user/0/podman/podman.sock", "/run/buildkit/buildkitd.sock", FIX["hostUnixSocket"]]
def connect(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(path)
report(present=[p for p in paths if os.path.exists(p)], results={p: attempt(lambda: connect(p)) for p in paths})`,
    check(answer, { fix }) {
      const f = facts(answer);
      assert.deepEqual(f.present, []);
      noneAllowed(f.results, "unix socket connections");
      assert.equal(fix.seen.unix, 0);
    },
  },
  {
    area: "network",
    name: "abstract unix sockets of the host are unreachable",
    code: `
def connect(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect("\\0" + name)
report(results={n: attempt(lambda: connect(n)) for n in FIX["abstractNames"]})`,
    check(answer, { fix }) {
      const results = facts(answer).results as Record<string, string>;
      assert.ok(Object.keys(results).length >= 1);
      noneAllowed(results, "abstract socket connections");
      assert.equal(fix.seen.unix, 0);
    },
  },
];

/** Filesystem: the root is read-only, the host's files are out of sight, writable places can't run code. */
export const filesystem: Attempt[] = [
  {
    area: "filesystem",
    name: "the root filesystem and system directories cannot be written",
    code: `
targets = ["/evil", "/etc/evil", "/usr/evil", "/usr/local/bin/evil", "/usr/lib/evil", "/bin/evil", "/sbin/evil",
           "/var/evil", "/var/tmp/evil", "/run/evil", "/root/evil", "/home/evil", "/opt/evil", "/srv/evil"]
def write(path, mode="w"):
    with open(path, mode) as f:
        f.write("x")
results = {p: attempt(lambda: write(p)) for p in targets}
results["append /etc/passwd"] = attempt(lambda: write("/etc/passwd", "a"))
results["rename /etc/passwd"] = attempt(lambda: os.rename("/etc/passwd", "/etc/passwd.old"))
results["chmod /etc/passwd"] = attempt(lambda: os.chmod("/etc/passwd", 0o666))
results["python stdlib"] = attempt(lambda: write(os.__file__ + "c"))
report(results=results)`,
    check(answer) {
      noneAllowed(facts(answer).results, "writes outside /tmp and /workspace");
    },
  },
  {
    area: "filesystem",
    name: "a marker file on the host is visible through no path",
    code: `
marker, mdir = FIX["markerFile"], FIX["markerDir"]
paths = [marker, "/proc/1/root" + marker, "/proc/self/root" + marker]
paths += [f"/proc/{p}/root{marker}" for p in os.listdir("/proc") if p.isdigit()]
visible = [p for p in paths if os.path.exists(p)]
names = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    names += [os.path.join(root, n) for n in dirs + files if "codemode-adv" in n or n == "host-marker.txt"]
report(visible=visible, names=names, in_mountinfo=mdir in open("/proc/self/mountinfo").read(),
       host_paths=[p for p in (FIX["repoRoot"], mdir, "/root/.ssh", "/work") if os.path.exists(p)])`,
    check(answer) {
      const f = facts(answer);
      assert.deepEqual(f.visible, []);
      assert.deepEqual(f.host_paths, []);
      assert.deepEqual(f.names, []);
      assert.equal(f.in_mountinfo, false);
    },
  },
  {
    area: "filesystem",
    name: "/etc/shadow is unreadable and /proc/1/root leads only into the sandbox",
    code: `
report(shadow=attempt(lambda: open("/etc/shadow").read()),
       shadow_via_pid1=attempt(lambda: open("/proc/1/root/etc/shadow").read()),
       pid1_root=root_of("/proc/1/root"),
       host_name_seen=socket.gethostname() == FIX["hostName"])`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.shadow, "EACCES");
      assert.equal(f.shadow_via_pid1, "EACCES");
      // It leads into the sandbox's own root (runc), or nowhere (gVisor refuses it).
      assert.match(String(f.pid1_root), /^(same|EACCES|EPERM)$/);
      assert.equal(f.host_name_seen, false);
    },
  },
  {
    area: "filesystem",
    name: "mountinfo shows no host directory mounted into the sandbox but the configured /data/in",
    code: `
points = [line.split()[4] for line in open("/proc/self/mountinfo").read().splitlines()]
known = {"/", "/tmp", "/workspace", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/run/.containerenv",
         "/run/podman-init", "/usr/sbin/docker-init", "/sbin/docker-init", "/dev/init",
         "/data/in"}  # the one folder the suite mounts (CODEMODE_MOUNTS, _attempts_files.ts)
# Engines bind single files they generate (hostname, hosts, init binaries; which ones varies by version)
# under /etc, /run and the init paths; a directory, or a file anywhere else, would be a host mount.
def engine_file(p):
    return os.path.isfile(p) and p.startswith(("/etc/", "/run/", "/usr/sbin/", "/sbin/"))
odd = [p for p in points if p not in known and not p.startswith(("/proc", "/dev", "/sys")) and not engine_file(p)]
text = open("/proc/self/mountinfo").read()
report(odd=odd, host_paths=[p for p in (FIX["markerDir"], FIX["repoRoot"]) if p in text])`,
    check(answer) {
      const f = facts(answer);
      assert.deepEqual(f.odd, [], "unexpected mounts");
      assert.deepEqual(f.host_paths, []);
    },
  },
  {
    area: "filesystem",
    name: "symlink and hardlink tricks reach nothing new",
    code: `
open("/tmp/own", "w").write("x")
links = {
    "hardlink /etc/passwd": attempt(lambda: os.link("/etc/passwd", "/tmp/passwd")),
    "hardlink /tmp to /workspace": attempt(lambda: os.link("/tmp/own", "/workspace/own")),
    "hardlink /usr/bin/python3": attempt(lambda: os.link(os.path.realpath(sys.executable), "/tmp/py")),
}
for name in ("/tmp/root-link", "/tmp/marker-link"):
    if os.path.lexists(name):
        os.unlink(name)
os.symlink("/proc/1/root", "/tmp/root-link")
os.symlink(FIX["markerFile"], "/tmp/marker-link")
report(links=links,
       marker=os.path.exists("/tmp/marker-link") or os.path.exists("/tmp/root-link" + FIX["markerFile"]),
       root=root_of("/tmp/root-link/"))`,
    check(answer) {
      const f = facts(answer);
      noneAllowed(f.links, "hard links");
      assert.equal(f.marker, false);
      assert.match(String(f.root), /^(same|EACCES|EPERM)$/);
    },
  },
  {
    area: "filesystem",
    name: "no kernel or disk device is present, and device nodes cannot be made",
    code: `
import stat
dangerous = ["mem", "kmem", "port", "kmsg", "sda", "vda", "nvme0n1", "xvda", "loop0", "loop-control", "mapper",
             "fuse", "kvm", "vhost-net", "net/tun", "dri", "snd", "cpu", "hwrng", "watchdog", "console"]
present = [d for d in dangerous if os.path.exists("/dev/" + d)]
def made(path, kind, major, minor):
    # A node counts only if it leads to the device: runc refuses mknod without CAP_MKNOD; gVisor makes the
    # node in its own tmpfs, where no device of the host is behind it and opening it fails.
    if os.path.lexists(path):
        os.unlink(path)
    os.mknod(path, kind | 0o600, os.makedev(major, minor))
    with open(path, "rb") as f:
        f.read(1)
def tun():
    import fcntl
    with open("/dev/net/tun", "r+b", buffering=0) as f:
        fcntl.ioctl(f, 0x400454CA, struct.pack("16sH", b"cm0", 0x0001 | 0x1000))  # TUNSETIFF, IFF_TUN
def fuse():
    fd = os.open("/dev/fuse", os.O_RDWR)
    try:
        options = f"fd={fd},rootmode=40000,user_id=65534,group_id=65534".encode()
        if syscall("mount", b"cm", b"/tmp", b"fuse", 0, options) != "ok":
            raise PermissionError(errno.EPERM, "mount")
    finally:
        os.close(fd)
report(present=present, results={
    "open /dev/kmsg": attempt(lambda: open("/dev/kmsg", "rb").read(1)),
    "open /dev/mem": attempt(lambda: open("/dev/mem", "rb").read(1)),
    "mknod mem": attempt(lambda: made("/tmp/mem", stat.S_IFCHR, 1, 1)),
    "mknod disk": attempt(lambda: made("/tmp/disk", stat.S_IFBLK, 8, 0)),
    "mknod kmsg": attempt(lambda: made("/tmp/kmsg", stat.S_IFCHR, 1, 11)),
    "tun interface": attempt(tun),
    "fuse mount": attempt(fuse),
})`,
    check(answer) {
      const f = facts(answer);
      // gVisor's kernel has fuse and tun devices of its own (no host device behind them); they may be
      // there, as long as using them fails like everything else here.
      assert.deepEqual((f.present as string[]).filter((d) => d !== "fuse" && d !== "net/tun"), []);
      noneAllowed(f.results, "device access");
    },
  },
  {
    area: "filesystem",
    name: "no writable place can execute a dropped binary, not even through the dynamic loader",
    code: `
import shutil, glob
loader = (glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*") + glob.glob("/lib/*/ld-linux*.so*"))[0]
writable, results = [], {}
for d in ["/tmp", "/workspace", "/dev/shm", "/dev/mqueue", "/var/tmp", "/run", "/run/lock", "/dev"]:
    path = os.path.join(d, "dropped-true")
    try:
        shutil.copy("/bin/true", path)
        os.chmod(path, 0o755)
    except OSError:
        continue
    writable.append(d)
    results[path] = attempt(lambda: subprocess.run([path], check=True))
    results["loader " + path] = attempt(lambda: subprocess.run([loader, path], check=True, capture_output=True))
report(writable=writable, results=results)`,
    check(answer, { isolation }) {
      const f = facts(answer);
      assert.ok((f.writable as string[]).includes("/tmp") && (f.writable as string[]).includes("/workspace"));
      const direct = Object.entries(f.results as Record<string, string>).filter(([k]) =>
        !k.startsWith("loader")
      );
      // gVisor honours noexec for execve, not for the loader's mmap(PROT_EXEC) (docs/security.md#gvisor):
      // the loader runs the binary inside gVisor's kernel, as code in anonymous executable memory (which
      // ctypes needs) could under runc too. Everywhere else the loader must fail as well.
      noneAllowed(
        isolation === "gvisor" ? Object.fromEntries(direct) : f.results,
        "executions from writable places",
      );
      assert.deepEqual(direct.filter(([, v]) => v !== "EACCES"), [], "noexec must refuse with EACCES");
    },
  },
  {
    area: "filesystem",
    name: "filling /dev/shm and /tmp is contained",
    timeout: 60,
    code: `
def fill(path):
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"\\0" * (1 << 20))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        if os.path.exists(path):
            os.unlink(path)
report(shm=fill("/dev/shm/fill"), tmp=fill("/tmp/fill"))`,
    check(answer) {
      // tmpfs pages count against the memory cap, so the OOM killer may end the sandbox first.
      if (answer.structured.session_lost === true) return;
      const f = facts(answer);
      assert.equal(f.shm, "ENOSPC");
      assert.match(String(f.tmp), /^(ENOSPC|ENOMEM)$/);
    },
  },
  {
    area: "filesystem",
    name: "kernel tunables in /proc and /sys cannot be written",
    code: `
def write(path, text):
    with open(path, "w") as f:
        f.write(text)
report(results={
    "hostname": attempt(lambda: write("/proc/sys/kernel/hostname", "evil")),
    "drop_caches": attempt(lambda: write("/proc/sys/vm/drop_caches", "3")),
    "sysrq": attempt(lambda: write("/proc/sysrq-trigger", "h")),
    "core_pattern": attempt(lambda: write("/proc/sys/kernel/core_pattern", "|/tmp/x")),
    "oom_score_adj": attempt(lambda: write("/proc/self/oom_score_adj", "-1000")),
    "thp": attempt(lambda: write("/sys/kernel/mm/transparent_hugepage/enabled", "always")),
    "cgroup memory": attempt(lambda: write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "-1")),
    "cgroup pids": attempt(lambda: write("/sys/fs/cgroup/pids/pids.max", "max")),
    "kcore": attempt(lambda: open("/proc/kcore", "rb").read(1)),
})`,
    async check(answer, ctx) {
      const { oom_score_adj: _judgedOnTheHost, ...others } = facts(answer).results as Record<string, string>;
      noneAllowed(others, "kernel interface writes");
      // Contained when no host process behind the sandbox took the score: under runc the write itself
      // fails; gVisor keeps the value in its own kernel, and the host's OOM killer never sees it.
      const scores = await Promise.all(
        (await hostProcessesOf(ctx)).map((pid) =>
          readFile(`/proc/${pid}/oom_score_adj`, "utf8").catch(() => "")
        ),
      );
      assert.ok(scores.length > 0, "no host process found behind the sandbox");
      assert.ok(!scores.some((score) => score.trim() === "-1000"), `host oom_score_adj: ${scores.join(" ")}`);
    },
  },
];

/** Privileges: nothing to gain, and the syscalls that widen the kernel's attack surface are refused. */
export const privileges: Attempt[] = [
  {
    area: "privileges",
    name: "setuid(0), setgid(0) and setgroups fail",
    code: `
report(uid=os.getuid(), gid=os.getgid(), results={
    "setuid": attempt(lambda: os.setuid(0)),
    "seteuid": attempt(lambda: os.seteuid(0)),
    "setresuid": attempt(lambda: os.setresuid(0, 0, 0)),
    "setgid": attempt(lambda: os.setgid(0)),
    "setgroups": attempt(lambda: os.setgroups([0])),
    "raw setuid": "allowed" if syscall("setuid", 0) == "ok" else "refused",
})`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.uid, 65534);
      assert.equal(f.gid, 65534);
      noneAllowed(f.results, "identity changes");
    },
  },
  {
    area: "privileges",
    name: "there is no sudo, and su and mount do not elevate",
    code: `
import shutil
def run(argv):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    return p.returncode, p.stdout
report(tools=[t for t in ("sudo", "doas", "pkexec") if shutil.which(t)],
       su=run(["su", "-c", "id -u", "root"]) if shutil.which("su") else None,
       mount=run(["mount", "-t", "tmpfs", "none", "/tmp"]) if shutil.which("mount") else None)`,
    check(answer) {
      const f = facts(answer);
      assert.deepEqual(f.tools, []);
      for (const result of [f.su, f.mount]) {
        if (result === null) continue;
        const [code, stdout] = result as [number, string];
        assert.notEqual(code, 0);
        assert.doesNotMatch(stdout, /^0$/m);
      }
    },
  },
  {
    area: "privileges",
    name: "every capability set is empty, no_new_privs is set and a seccomp filter is on",
    code: `
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
facts = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "Seccomp")}
# Asked of the kernel itself: gVisor's /proc/self/status has no CapAmb and no NoNewPrivs line.
ambient = [c for c in range(64) if _libc.prctl(47, 1, c, 0, 0) == 1]  # PR_CAP_AMBIENT_IS_SET
facts["CapAmb"] = "%016x" % sum(1 << c for c in ambient)
facts["NoNewPrivs"] = str(_libc.prctl(39, 0, 0, 0, 0))  # PR_GET_NO_NEW_PRIVS
report(**facts)`,
    check(answer) {
      const zero = "0000000000000000";
      assert.deepEqual(facts(answer), {
        CapInh: zero,
        CapPrm: zero,
        CapEff: zero,
        CapBnd: zero,
        CapAmb: zero,
        NoNewPrivs: "1",
        Seccomp: "2",
      });
    },
  },
  {
    area: "privileges",
    name: "creating user, mount, network or other namespaces fails",
    seccomp: true,
    code: `
flags = {"user": 0x10000000, "mount": 0x20000, "net": 0x40000000, "pid": 0x20000000, "ipc": 0x08000000,
         "uts": 0x04000000, "cgroup": 0x02000000, "user+mount+net": 0x10000000 | 0x20000 | 0x40000000}
report(results={name: in_child(lambda: syscall("unshare", flag)) for name, flag in flags.items()})`,
    check(answer) {
      refused(facts(answer).results, "unshare", "unshare");
    },
  },
  {
    area: "privileges",
    name: "mount and umount fail",
    code: `
report(results={
    "mount tmpfs": syscall("mount", b"none", b"/workspace", b"tmpfs", 0, None),
    "mount bind /proc": syscall("mount", b"/proc", b"/tmp", None, 0x1000, None),
    "mount remount /": syscall("mount", None, b"/", None, 0x20, None),
    "umount2 /tmp": syscall("umount2", b"/tmp", 0),
})`,
    check(answer) {
      refused(facts(answer).results, "mount");
    },
  },
  {
    area: "privileges",
    name: "mounting inside a fresh user namespace fails",
    seccomp: true,
    code: `
def mount_in_userns():
    unshared = syscall("unshare", 0x10000000 | 0x20000)
    return unshared if unshared != "ok" else syscall("mount", b"none", b"/tmp", b"tmpfs", 0, None)
report(result=in_child(mount_in_userns))`,
    check(answer) {
      // unshare answers first; a kernel that let it through would leave mount to answer.
      refused({ "unshare then mount": facts(answer).result }, "mount in a user namespace", "unshare");
    },
  },
  {
    area: "privileges",
    name: "ptrace of PID 1 and of the sandbox runtime fails",
    seccomp: true,
    code: `
def attach(pid):
    result = syscall("ptrace", 16, pid, 0, 0)
    if result == "ok":
        try:
            os.waitpid(pid, 0x40000000)
        except OSError:
            pass
        syscall("ptrace", 17, pid, 0, 0)
    return result
runtime = os.getpid()
report(results={"pid 1": in_child(lambda: attach(1)), "runtime": in_child(lambda: attach(runtime))})`,
    check(answer) {
      refused(facts(answer).results, "ptrace", "ptrace");
    },
  },
  {
    area: "privileges",
    name: "kernel modules cannot be loaded or removed",
    code: `
fd = os.open("/dev/null", os.O_RDONLY)
report(results={
    "init_module": syscall("init_module", b"\\0" * 64, 64, b""),
    "finit_module": syscall("finit_module", fd, b"", 0),
    "delete_module": syscall("delete_module", b"ext4", 0x800),
})`,
    check(answer) {
      refused(facts(answer).results, "module syscalls");
    },
  },
  {
    area: "privileges",
    name: "the kernel keyring is out of reach",
    seccomp: true,
    code: `
report(results={
    "keyctl get session keyring": syscall("keyctl", 0, -3, 1),
    "keyctl join session keyring": syscall("keyctl", 1, None),
    "add_key": syscall("add_key", b"user", b"codemode", b"x", 1, -2),
})`,
    check(answer) {
      refused(facts(answer).results, "keyring syscalls");
    },
  },
  {
    area: "privileges",
    name: "bpf() fails",
    code: `
attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 4, 1), 72)
report(results={"map create": syscall("bpf", 0, attr, 72), "prog load": syscall("bpf", 5, ctypes.create_string_buffer(128), 128)})`,
    check(answer) {
      refused(facts(answer).results, "bpf", "bpf");
    },
  },
  {
    area: "privileges",
    name: "perf_event_open fails, even for the sandbox's own user-space counters",
    seccomp: true,
    code: `
attr = ctypes.create_string_buffer(struct.pack("=IIQQQQQ", 1, 112, 0, 0, 0, 0, 1 | 1 << 5 | 1 << 6), 112)
report(results={"own task clock": syscall("perf_event_open", attr, 0, -1, -1, 0)})`,
    check(answer) {
      refused(facts(answer).results, "perf_event_open", "perf_event_open");
    },
  },
  {
    area: "privileges",
    name: "io_uring cannot be set up",
    seccomp: true,
    code: `
report(results={"io_uring_setup": syscall("io_uring_setup", 1, ctypes.create_string_buffer(120))})`,
    check(answer) {
      refused(facts(answer).results, "io_uring");
    },
  },
  {
    area: "privileges",
    name: "userfaultfd fails, also in user-mode-only form",
    seccomp: true,
    code: `
report(results={"default": syscall("userfaultfd", 0), "user mode only": syscall("userfaultfd", 1)})`,
    check(answer) {
      refused(facts(answer).results, "userfaultfd", "userfaultfd");
    },
  },
  {
    area: "privileges",
    name: "kexec, reboot, chroot, pivot_root, setns, acct, swapon, clock and hostname changes fail",
    code: `
import time
netns = os.open("/proc/self/ns/net", os.O_RDONLY)
root = os.open("/", os.O_RDONLY)
now = struct.pack("=qq", int(time.time()), 0)
calls = {
    "kexec_load": syscall("kexec_load", 0, 0, None, 0),
    "reboot (cad off)": syscall("reboot", 0xfee1dead, 672274793, 0, None),
    "chroot": syscall("chroot", b"/tmp"),
    "pivot_root": syscall("pivot_root", b"/tmp", b"/tmp"),
    "setns": syscall("setns", netns, 0),
    "acct": syscall("acct", b"/tmp/acct"),
    "swapon": syscall("swapon", b"/tmp/swap", 0),
    "open_by_handle_at": syscall("open_by_handle_at", root, ctypes.create_string_buffer(16), 0),
    "settimeofday": syscall("settimeofday", now, None),
    "sethostname": syscall("sethostname", b"evil", 4),
    "syslog": syscall("syslog", 10, None, 0),
}
if "iopl" in _NR:
    calls["iopl"] = syscall("iopl", 3)
    calls["ioperm"] = syscall("ioperm", 0x80, 1, 1)
report(results=calls)`,
    check(answer) {
      refused(facts(answer).results, "privileged syscalls");
    },
  },
];
