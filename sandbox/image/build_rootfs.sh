#!/usr/bin/env bash
# Builds the sandbox root filesystem from Debian packages and writes it as a tar archive that
# `podman import`, `docker import` and `nerdctl image import` accept. Needs root (debootstrap) and
# network access to a Debian mirror only; no container registry.
#
# usage: build_rootfs.sh [--minimal] [--suite SUITE] [--mirror URI] OUT.tar
#
# By default the image has the data-science set (numpy, pandas, matplotlib, scipy, scikit-learn, sympy,
# pillow) with matplotlib's font cache built in, so the first plot in a fresh sandbox is not slow;
# --minimal builds python3 alone. --data-science is accepted and means the default.
#
# The mirror defaults to the one this machine's apt already uses (CODEMODE_APT_MIRROR overrides it),
# so the recipe works behind whatever mirror or proxy the machine is set up with.
set -euo pipefail

suite=bookworm
mirror="${CODEMODE_APT_MIRROR:-}"
minimal=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minimal) minimal=1 ;;
    --data-science) minimal=0 ;;
    --suite) suite="$2"; shift ;;
    --mirror) mirror="$2"; shift ;;
    -h|--help) sed -n '5,10p' "$0"; exit 0 ;;
    -*) echo "E: Unknown option \"$1\": see --help" >&2; exit 2 ;;
    *) out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || { echo "E: Missing output path: pass OUT.tar" >&2; exit 2; }
[ "$(id -u)" = 0 ] || {
  echo "E: debootstrap needs root: run as root or with sudo (for rootless podman, build the archive as root," \
    "then import it as the user: codemode image build --rootfs OUT.tar)" >&2
  exit 1
}
command -v debootstrap >/dev/null || { echo "E: debootstrap is not installed: apt-get install debootstrap" >&2; exit 1; }

# First URI serving "$suite" in the machine's apt sources (deb822 files first, then one-line lists).
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '
      function flush() { if (deb && uri != "" && (" " suites " ") ~ (" " suite " ")) { print uri; found = 1; exit } }
      /^[[:space:]]*$/ { flush(); deb = 0; uri = ""; suites = ""; next }
      /^Types:/ { deb = ($0 ~ /[[:space:]]deb([[:space:]]|$)/) }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { $1 = ""; suites = $0 }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2 }'
  done
}
if [ -z "$mirror" ]; then
  mirror="$(apt_mirror | head -n1)"
fi
[ -n "$mirror" ] || {
  echo "E: No apt source for \"$suite\" found in /etc/apt: pass --mirror URI or set CODEMODE_APT_MIRROR" >&2
  exit 1
}

packages=python3,ca-certificates
if [ "$minimal" = 0 ]; then
  packages="$packages,python3-numpy,python3-pandas,python3-matplotlib,python3-scipy,python3-sklearn"
  packages="$packages,python3-sympy,python3-pil"
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

root="$(mktemp -d "${TMPDIR:-/tmp}/codemode-rootfs.XXXXXX")"
trap 'rm -rf "$root"' EXIT

echo "I: Building rootfs for $suite from $mirror with $packages"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror"

if [ "$minimal" = 0 ]; then
  # Debian's scipy depends on a C++ compiler toolchain (pythran) that only building software needs.
  echo "I: Removing compilers and headers the libraries do not need at run time"
  # shellcheck disable=SC2086 # one package name per word
  unneeded="$(chroot "$root" python3 - ${packages//,/ } <"$here/unneeded_packages.py")"
  if [ -n "$unneeded" ]; then
    # shellcheck disable=SC2086
    chroot "$root" dpkg --purge --force-depends $unneeded 2>&1 | grep -E "^dpkg: error" >&2 || true
  fi
  # The sandbox's root is read-only and its MPLCONFIGDIR (/tmp/matplotlib) starts empty: the runtime seeds
  # it from here when matplotlib is first imported, instead of matplotlib scanning every font again.
  echo "I: Building matplotlib's font cache and checking every library imports"
  mkdir -p "$root/usr/share/codemode/mplconfig"
  chroot "$root" env -i HOME=/nonexistent MPLCONFIGDIR=/usr/share/codemode/mplconfig python3 -c \
    "import matplotlib.pyplot, numpy, pandas, PIL.Image, scipy.optimize, scipy.stats, sklearn.linear_model, sympy"
  ls "$root"/usr/share/codemode/mplconfig/fontlist-*.json >/dev/null
  chmod -R a+rX "$root/usr/share/codemode"
fi

echo "I: Trimming documentation and caches"
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/var/cache/apt/* \
  "$root"/var/cache/debconf/*-old "$root"/var/lib/apt/lists/* "$root"/var/log/* \
  "$root"/tmp/* "$root"/var/tmp/*
# The sandbox's working directory; the runtime mounts a tmpfs over it.
mkdir -p "$root/workspace"
chmod 1777 "$root/workspace"

echo "I: Packing $out"
# /dev, /proc and /sys are provided by the engine; device nodes in the archive would break rootless import.
tar --numeric-owner -C "$root" --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -cf "$out.partial" .
mv "$out.partial" "$out"
echo "I: Wrote $out ($(du -h "$out" | cut -f1))"
