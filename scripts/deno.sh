#!/usr/bin/env bash
# Runs the project's Deno. `deno task` would resolve `deno` to node_modules/.bin/deno and try to run that
# native binary as an npm JavaScript bin, so tasks call this script instead.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$here/node_modules/.bin/deno" ]; then exec "$here/node_modules/.bin/deno" "$@"; fi
exec deno "$@"
