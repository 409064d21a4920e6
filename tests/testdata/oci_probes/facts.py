# Prints, as one JSON object, what a sandboxed program can see and do: identity, capabilities, writable and
# executable places, network, environment, PID 1 and rlimits.
import errno, json, os, shutil, socket, subprocess
facts = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd()}
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
facts["cap_eff"] = status["CapEff"].strip()
facts["no_new_privs"] = status["NoNewPrivs"].strip()
facts["root_ro"] = any(l.split()[1] == "/" and l.split()[3].split(",")[0] == "ro" for l in open("/proc/self/mounts"))
try:
    open("/codemode-probe", "w")
    facts["root_write"] = "ok"
except OSError as e:
    facts["root_write"] = errno.errorcode[e.errno]
writable = []
for d in ["/", "/etc", "/root", "/home", "/var/tmp", "/run", "/usr", "/tmp", "/workspace", "/dev/shm"]:
    try:
        with open(os.path.join(d, "codemode-probe"), "w") as f:
            f.write("x")
        writable.append(d)
    except OSError:
        pass
facts["writable"] = writable
facts["exec"] = {}
for d in ["/tmp", "/workspace"]:
    shutil.copy("/bin/true", d + "/true")
    os.chmod(d + "/true", 0o755)
    try:
        subprocess.run([d + "/true"], check=True)
        facts["exec"][d] = "ok"
    except OSError as e:
        facts["exec"][d] = errno.errorcode[e.errno]
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("1.1.1.1", 53))
    facts["connect"] = "ok"
except OSError as e:
    facts["connect"] = str(e)
facts["interfaces"] = sorted(name for _, name in socket.if_nameindex())
facts["env"] = dict(os.environ)
facts["pid1"] = open("/proc/1/cmdline").read().split("\0")[0]
facts["rlimit_nofile"] = open("/proc/self/limits").read().split("Max open files")[1].split()[:2]
print(json.dumps(facts))
