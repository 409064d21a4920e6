#!/usr/bin/env bash
# Builds the release binaries, dist/release/codemode-<version>-<platform> for linux-x64, linux-arm64,
# darwin-x64 and darwin-arm64 (or the platforms named with --platform), and SHA256SUMS over the ones it
# built. Each is scripts/compile.sh cross-compiled with Bun's --target; each platform's Deno (npm
# @deno/<platform>, embedded in the binary) and Bun runtime (npm @oven/bun-<platform>, which the binary
# is built on) come from the npm registry at the versions node_modules holds, fetched once with
# `npm pack` (so through npm's cache) into dist/release/packages/. Nothing else is downloaded.
# Only a binary for this machine's platform is run here; tests/e2e/release_test.ts runs the linux-arm64
# one under qemu-user and checks the darwin ones' format (docs/install.md).
# Usage: scripts/release.sh [--platform PLATFORM]... [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

out=dist/release
platforms=()
while [ $# -gt 0 ]; do
  case "$1" in
    --platform) platforms+=("$2"); shift ;;
    --out) out="$2"; shift ;;
    *) echo "release.sh: unknown argument \"$1\"; use --platform PLATFORM or --out DIR" >&2; exit 2 ;;
  esac
  shift
done
[ ${#platforms[@]} -gt 0 ] || platforms=(linux-x64 linux-arm64 darwin-x64 darwin-arm64)

version_of() { node -p "require('./$1/package.json').version"; }
version="$(version_of .)"
deno_version="$(version_of node_modules/deno)"
bun_version="$(version_of node_modules/bun)"
packages=dist/release/packages
mkdir -p "$out" "$packages"

# Unpacks npm package $1 at version $2 into $packages/$1 unless it is there at that version.
fetch() {
  local dir="$packages/$1"
  if [ -f "$dir/package.json" ] && [ "$(version_of "$dir")" = "$2" ]; then return; fi
  local tmp
  tmp="$(mktemp -d)"
  (npm pack "$1@$2" --pack-destination "$tmp" --loglevel=error >/dev/null) || { rm -rf "$tmp"; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir"
  tar xzf "$tmp"/*.tgz -C "$dir" --strip-components=1
  rm -rf "$tmp"
}

started=$SECONDS
built=()
for platform in "${platforms[@]}"; do
  case "$platform" in
    linux-x64) deno_pkg=@deno/linux-x64-glibc bun_pkg=@oven/bun-linux-x64 ;;
    linux-arm64) deno_pkg=@deno/linux-arm64-glibc bun_pkg=@oven/bun-linux-aarch64 ;;
    darwin-x64) deno_pkg=@deno/darwin-x64 bun_pkg=@oven/bun-darwin-x64 ;;
    darwin-arm64) deno_pkg=@deno/darwin-arm64 bun_pkg=@oven/bun-darwin-aarch64 ;;
    *) echo "release.sh: unknown platform \"$platform\"" >&2; exit 2 ;;
  esac
  t=$SECONDS
  fetch "$deno_pkg" "$deno_version"
  fetch "$bun_pkg" "$bun_version"
  chmod +x "$packages/$bun_pkg/bin/bun" "$packages/$deno_pkg/deno"
  name="codemode-$version-$platform"
  bash scripts/compile.sh --target "$platform" --out "$out/$name" --packages "$packages" \
    --bun "$packages/$bun_pkg/bin/bun"
  built+=("$name")
  echo "release.sh: $name in $((SECONDS - t)) s" >&2
done
(cd "$out" && sha256sum "${built[@]}" >SHA256SUMS)
echo "release.sh: ${#built[@]} binaries and SHA256SUMS in $out/ in $((SECONDS - started)) s" >&2
