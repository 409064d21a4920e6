#!/usr/bin/env bash
# Builds dist/codemode: one self-contained executable (no Deno, no node_modules needed at run time).
# `bun build --compile` by default: it works offline, and its entry (dist/embed/<target>/entry.ts, see
# scripts/compile_entry.ts) embeds the runtime scripts/embed_runtime.ts prepares there (a zstd-compressed
# Deno, the Pyodide files and a start-up snapshot), which the pyodide runtime unpacks into the state
# directory on first use.
# The target platform is this machine's unless --target names another: the binary carries the Deno of
# npm's @deno/<platform> package, which npm installs for this machine only; for another platform pass
# --packages DIR (a folder holding @deno/<platform>/) and --bun PATH (that platform's Bun executable, from
# npm's @oven/bun-<platform>) instead of letting Bun download it. scripts/release.sh does both.
# `deno compile` needs its runtime (denort) from Deno's download server; pass --deno to use it where that
# server is reachable. That binary embeds nothing: its pyodide runtime needs node_modules/pyodide or an
# assetDir, and a deno on PATH.
# Usage: scripts/compile.sh [--deno] [--out PATH] [--target linux-x64|linux-arm64|darwin-x64|darwin-arm64]
#                           [--packages DIR] [--bun PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

compiler=bun
out=dist/codemode
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
arch="$(uname -m)"
case "$arch" in x86_64 | amd64) arch=x64 ;; aarch64) arch=arm64 ;; esac
host="$os-$arch"
target="$host"
embed_args=()
bun_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deno) compiler=deno ;;
    --out) out="$2"; shift ;;
    --target) target="$2"; shift ;;
    --packages) embed_args+=(--packages "$2"); shift ;;
    --bun) bun_args+=("--compile-executable-path=$2"); shift ;;
    *) echo "compile.sh: unknown argument \"$1\"; use --deno, --out PATH, --target PLATFORM, --packages DIR or --bun PATH" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT

if [ "$compiler" = deno ]; then
  deno compile --allow-all --quiet --output "$tmp" cli.ts
else
  deno run -A scripts/embed_runtime.ts --target "$target" ${embed_args[@]+"${embed_args[@]}"}
  # --minify-syntax/whitespace keep names (stack traces stay readable); bytecode speeds up start-up;
  # --splitting keeps each dynamically imported module in a chunk of its own, loaded when first imported
  # (without it the whole program is loaded at start, and `--version` pays for every library).
  # The workers (result validation, core/upstream/result_validation_worker.ts; span export,
  # core/observe/span_export_worker.ts) are entries of their own: Bun compiles a worker in only when it is
  # named here, and codemode starts it by its URL.
  bun build "dist/embed/$target/entry.ts" core/upstream/result_validation_worker.ts \
    core/observe/span_export_worker.ts --compile --splitting \
    --bytecode --format=esm --minify-syntax --minify-whitespace --sourcemap=none --target="bun-$target" \
    ${bun_args[@]+"${bun_args[@]}"} --outfile "$tmp" >&2
fi
chmod +x "$tmp"
mv -f "$tmp" "$out"
if [ "$target" != "$host" ]; then
  echo "compile.sh: built $out ($(du -h "$out" | cut -f1), $compiler, $target; not run: another platform)" >&2
  exit 0
fi
# A binary that cannot even print its version is not worth keeping.
version="$("$out" --version)" || { echo "compile.sh: $out --version failed" >&2; rm -f "$out"; exit 1; }
echo "compile.sh: built $out ($version, $(du -h "$out" | cut -f1), $compiler, $target)" >&2
