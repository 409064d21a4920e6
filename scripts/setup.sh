#!/usr/bin/env bash
# Prepares a Debian 12 machine for codemode's tests, as root: container engines (podman rootful and
# rootless, docker), python3, deno and bun, npm dependencies, and the sandbox image in all three engine
# stores.
# Idempotent: a second run only checks. Prints how long each step took.
#
# Environment: CODEMODE_ROOTLESS_USER (default codemode-rootless), CODEMODE_IMAGE (default
# codemode-sandbox:latest), CODEMODE_REBUILD_IMAGE=1 to rebuild an image that already exists,
# CODEMODE_APT_MIRROR to build the image from another mirror than the machine's apt sources. The image is
# the default one, with the data-science libraries; an existing image without them is rebuilt.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rootless_user="${CODEMODE_ROOTLESS_USER:-codemode-rootless}"
image="${CODEMODE_IMAGE:-codemode-sandbox:latest}"
dockerd_log=/var/log/codemode-dockerd.log

[ "$(id -u)" = 0 ] || { echo "setup.sh must run as root (it installs packages and creates a user)" >&2; exit 1; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Seconds since a now_ms mark, with one decimal.
since() { local ms=$(($(now_ms) - $1)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }
step_started=0
step() { step_started=$(now_ms); echo "==> $*"; }
done_step() { echo "    done in $(since "$step_started")"; }
setup_started=$(now_ms)

step "Installing container engines, image tools, python3 and the test browser from apt"
# chromium: the dashboard's browser tests drive Debian's headless Chromium (puppeteer-core downloads none).
# python3: unit tests run the sandbox runtime with the host's python3 (tests/unit/_local_python.ts).
# mypy: the stub tests type-check the generated .pyi stubs with Debian's mypy (tests/unit/stubs_test.ts).
# runsc: gVisor, the CODEMODE_ISOLATION=gvisor tier.
# haproxy, nginx, iproute2: the fleet suite puts both balancers in front of nodes in network namespaces.
# qemu-user-static, libc6-arm64-cross, libgcc-s1-arm64-cross: the linux-arm64 release binary (and the
# Deno it carries) run under emulation in the e2e suite.
packages=(podman runc docker.io debootstrap uidmap slirp4netns fuse-overlayfs catatonit tini
  containernetworking-plugins iptables ca-certificates hyperfine chromium python3 runsc haproxy nginx iproute2 mypy
  qemu-user-static libc6-arm64-cross libgcc-s1-arm64-cross)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # runc in the same transaction makes it satisfy podman's "crun | runc" dependency.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The balancers run only as the tests start them, on ports of their own: not as services on port 80.
  if [ -d /run/systemd/system ]; then systemctl disable --now nginx haproxy >/dev/null 2>&1 || true; fi
fi
done_step

step "Registering gVisor's runsc with docker"
# docker takes an OCI runtime by the name its daemon config gives it, with runsc's flags fixed there:
# no network stack, the platform, codemode's seccomp profile applied inside gVisor. codemode checks this
# entry (docs/security.md#gvisor). Merged into the existing config; dockerd reloads runtimes on SIGHUP.
gvisor_platform="${CODEMODE_GVISOR_PLATFORM:-ptrace}"
gvisor_changed=0
python3 - "$(command -v runsc)" "$gvisor_platform" <<'PY' || gvisor_changed=$?
import json, os, sys
path = "/etc/docker/daemon.json"
config = json.load(open(path)) if os.path.exists(path) else {}
entry = {"path": sys.argv[1], "runtimeArgs": ["--network=none", f"--platform={sys.argv[2]}", "--oci-seccomp"]}
if config.get("runtimes", {}).get("codemode-gvisor") == entry:
    sys.exit(0)
config.setdefault("runtimes", {})["codemode-gvisor"] = entry
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".tmp", "w") as f:
    json.dump(config, f, indent=2)
os.replace(path + ".tmp", path)
sys.exit(10)
PY
[ "$gvisor_changed" = 0 ] || [ "$gvisor_changed" = 10 ] || { echo "cannot write /etc/docker/daemon.json" >&2; exit 1; }
if [ "$gvisor_changed" = 10 ] && docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then systemctl reload docker; else kill -HUP "$(pidof dockerd)"; fi
  for _ in $(seq 1 20); do docker info --format '{{json .Runtimes}}' | grep -q codemode-gvisor && break; sleep 0.5; done
fi
echo "    $(runsc --version | head -n1), platform $gvisor_platform, docker runtime codemode-gvisor"
done_step

step "Starting dockerd"
if ! docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    systemctl start docker
  else
    nohup dockerd >>"$dockerd_log" 2>&1 &
  fi
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see $dockerd_log" >&2; tail -20 "$dockerd_log" >&2; exit 1; }
fi
echo "    docker server $(docker version --format '{{.Server.Version}}')"
done_step

step "Configuring podman to use runc"
# crun fails on cgroup v1 hosts with a hybrid v2 mount ("cgroups in hybrid mode not supported"). The
# drop-in is read by rootful and rootless podman alike.
mkdir -p /etc/containers/containers.conf.d
cat >/etc/containers/containers.conf.d/50-codemode-runc.conf <<'EOF'
# Written by codemode's scripts/setup.sh: crun cannot run containers on cgroup v1 hybrid hosts.
[engine]
runtime = "runc"
EOF
echo "    rootful podman runtime: $(podman info --format '{{.Host.OCIRuntime.Name}}')"
done_step

step "Creating the rootless podman user $rootless_user"
id "$rootless_user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$rootless_user"
user_home="$(getent passwd "$rootless_user" | cut -d: -f6)"
# useradd usually allocates subordinate ids; otherwise take the range after the highest one in use.
for file in /etc/subuid /etc/subgid; do
  touch "$file"
  if ! grep -q "^$rootless_user:" "$file"; then
    first=$(awk -F: '{ end = $2 + $3; if (end > max) max = end } END { print (max < 100000 ? 100000 : max) }' "$file")
    echo "$rootless_user:$first:65536" >>"$file"
  fi
done
# Native rootless overlayfs needs Linux 5.13+; without it podman falls back to vfs (a full copy per container).
kernel="$(uname -r | cut -d. -f1-2)"
if [ "$(printf '%s\n5.13\n' "$kernel" | sort -V | head -n1)" = "5.13" ]; then
  storage_conf="$user_home/.config/containers/storage.conf"
  if [ ! -f "$storage_conf" ]; then
    runuser -u "$rootless_user" -- mkdir -p "$user_home/.config/containers"
    printf '[storage]\ndriver = "overlay"\n' | runuser -u "$rootless_user" -- tee "$storage_conf" >/dev/null
    # A store created earlier with vfs would make podman refuse the new driver.
    (cd / && runuser -u "$rootless_user" -- podman system reset -f >/dev/null 2>&1) || true
  fi
fi
rootless_info="$(cd / && runuser -u "$rootless_user" -- podman info \
  --format '{{.Host.Security.Rootless}} {{.Host.OCIRuntime.Name}} {{.Store.GraphDriverName}}' 2>/dev/null)" || {
  echo "rootless podman does not work for $rootless_user:" >&2
  (cd / && runuser -u "$rootless_user" -- podman info) >&2 || true
  exit 1
}
echo "    rootless podman (rootless, runtime, storage): $rootless_info"
done_step

step "Installing deno and bun"
command -v deno >/dev/null || npm install -g deno >/dev/null
command -v bun >/dev/null || npm install -g bun >/dev/null
echo "    $(deno --version | head -n1), bun $(bun --version)"
done_step

step "Installing npm dependencies"
# npm install, not npm ci: npm leaves the other platforms' optional @deno/* binaries out of the
# lockfile and npm ci then rejects it; npm install still installs exactly the locked versions.
if [ -f "$repo/node_modules/.package-lock.json" ] &&
  [ ! "$repo/package-lock.json" -nt "$repo/node_modules/.package-lock.json" ]; then
  echo "    node_modules is up to date"
else
  (cd "$repo" && npm install --no-audit --no-fund --loglevel=error)
fi
# The Pyodide start-up snapshot a checkout copies on first use (kept when it is up to date).
(cd "$repo" && node_modules/.bin/deno run -A scripts/pyodide_snapshot.ts 2>&1 | sed 's/^/    /') ||
  echo "    no snapshot made: each Pyodide sandbox's first start makes one"
done_step

step "Building the sandbox image $image"
rootless() { (cd / && runuser -u "$rootless_user" -- "$@"); }
libraries="import matplotlib, numpy, pandas, PIL, scipy, sklearn, sympy"
# An image from before the data-science default (or any other without the libraries) is rebuilt.
complete() {
  "$@" run --rm --network none --pull never "$image" python3 -c "$libraries" >/dev/null 2>&1
}
need_podman=1; need_docker=1; need_rootless=1
if [ "${CODEMODE_REBUILD_IMAGE:-0}" != 1 ]; then
  podman image exists "$image" && complete podman && need_podman=0
  docker image inspect "$image" >/dev/null 2>&1 && complete docker && need_docker=0
  rootless podman image exists "$image" && complete rootless podman && need_rootless=0
fi
if [ $((need_podman + need_docker + need_rootless)) -gt 0 ]; then
  tar_dir="$(mktemp -d /tmp/codemode-image.XXXXXX)"
  trap 'rm -rf "$tar_dir"' EXIT
  chmod 755 "$tar_dir"
  tar="$tar_dir/rootfs.tar"
  t=$(now_ms)
  bash "$repo/sandbox/image/build_rootfs.sh" "$tar" | grep -E '^I: (Building|Removing|Wrote)' | sed 's/^/    /' || true
  [ -f "$tar" ] || { echo "building the root filesystem failed" >&2; exit 1; }
  chmod 644 "$tar"
  echo "    rootfs built in $(since "$t")"
  image_id() { "$@" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true; }
  # Re-tagging leaves the old image dangling; drop it unless a container still uses it.
  drop_replaced() {
    local old="$1"; shift
    if [ -n "$old" ] && [ "$old" != "$(image_id "$@")" ]; then "$@" rmi "$old" >/dev/null 2>&1 || true; fi
  }
  # The product's own import path (cli/image.ts -> plugins/runtime), so the image config matches.
  cd "$repo"
  for engine in podman docker; do
    var="need_$engine"
    [ "${!var}" = 1 ] || continue
    t=$(now_ms)
    old="$(image_id "$engine")"
    deno run -A cli.ts image build --runtime "$engine" --rootfs "$tar" --tag "$image" 2>&1 | sed 's/^/    /'
    drop_replaced "$old" "$engine"
    echo "    $engine import in $(since "$t")"
  done
  if [ "$need_rootless" = 1 ]; then
    t=$(now_ms)
    old="$(image_id rootless podman)"
    CODEMODE_IMPORT_TAR="$tar" CODEMODE_IMPORT_REF="$image" CODEMODE_IMPORT_USER="$rootless_user" deno eval '
      import { podman } from "./plugins/runtime/podman.ts";
      const user = Deno.env.get("CODEMODE_IMPORT_USER")!;
      const plugin = podman({ command: ["runuser", "-u", user, "--", "podman"] });
      await plugin.importImage(Deno.env.get("CODEMODE_IMPORT_TAR")!, Deno.env.get("CODEMODE_IMPORT_REF")!);
    '
    drop_replaced "$old" rootless podman
    echo "    rootless podman import in $(since "$t")"
  fi
else
  echo "    already present in rootful podman, docker and rootless podman (CODEMODE_REBUILD_IMAGE=1 rebuilds)"
fi
done_step

step "Checking a sandbox starts in each engine and has the libraries"
# A tmpfs /tmp as the sandbox has: matplotlib needs a writable config directory.
flags=(--rm --network none --read-only --tmpfs /tmp:rw,noexec,nosuid,nodev --cap-drop ALL
  --security-opt no-new-privileges --user 65534:65534 --ulimit nofile=1024:1024 --ulimit nproc=512:512
  --pull never "$image" python3 -c "$libraries; print('ok')")
# No --runtime: this also checks that the runc drop-in is in effect.
echo "    podman: $(podman run "${flags[@]}")"
echo "    docker: $(docker run "${flags[@]}")"
echo "    rootless podman: $(rootless podman run "${flags[@]}" 2>/dev/null)"
# gVisor, as CODEMODE_ISOLATION=gvisor runs it (docs/security.md#gvisor): gVisor's kernel answers. The
# libraries need codemode's runsc profile (threads), which `codemode doctor` and the suite use.
runsc_flags=(--runtime "$(command -v runsc)" --runtime-flag network=none
  --runtime-flag "platform=$gvisor_platform" --runtime-flag oci-seccomp)
gvisor_check=("${flags[@]:0:${#flags[@]}-3}" python3 -c "import platform; print('ok, kernel', platform.release())")
echo "    podman under gVisor: $(podman run "${runsc_flags[@]}" "${gvisor_check[@]}")"
echo "    docker under gVisor: $(docker run --runtime codemode-gvisor "${gvisor_check[@]}")"
done_step

echo "==> Setup finished in $(since "$setup_started")"
