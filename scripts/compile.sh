#!/usr/bin/env bash
# Builds dist/codemode: one self-contained executable (no Deno, no node_modules needed at run time).
# `bun build --compile` by default: it works offline, and its entry (scripts/compile_entry.ts) embeds the
# Pyodide files, which the pyodide runtime unpacks into the state directory on first use (that runtime
# still needs a deno on PATH to host Pyodide). `deno compile` needs its runtime (denort) from Deno's
# download server; pass --deno to use it where that server is reachable (or denort is cached). Its
# binary embeds no Pyodide: the pyodide runtime there needs node_modules/pyodide or an assetDir.
# Usage: scripts/compile.sh [--deno] [--out PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

compiler=bun
out=dist/codemode
while [ $# -gt 0 ]; do
  case "$1" in
    --deno) compiler=deno ;;
    --out) out="$2"; shift ;;
    *) echo "compile.sh: unknown argument \"$1\"; use --deno or --out PATH" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT

if [ "$compiler" = deno ]; then
  deno compile --allow-all --quiet --output "$tmp" cli.ts
else
  # --minify-syntax/whitespace keep names (stack traces stay readable); bytecode speeds up start-up;
  # --splitting keeps each dynamically imported module in a chunk of its own, loaded when first imported
  # (without it the whole program is loaded at start, and `--version` pays for every library).
  bun build scripts/compile_entry.ts --compile --splitting --bytecode --format=esm --minify-syntax --minify-whitespace \
    --sourcemap=none --target=bun --outfile "$tmp" >&2
fi
chmod +x "$tmp"
mv -f "$tmp" "$out"
# A binary that cannot even print its version is not worth keeping.
version="$("$out" --version)" || { echo "compile.sh: $out --version failed" >&2; rm -f "$out"; exit 1; }
echo "compile.sh: built $out ($version, $(du -h "$out" | cut -f1), $compiler)" >&2
