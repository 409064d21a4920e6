#!/usr/bin/env bash
# The whole test suite: machine setup (idempotent), static checks, then unit, integration (real
# podman/docker containers, real MCP servers from npm) and e2e (compiled binary, real MCP clients).
# Ends with one plain "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${CODEMODE_SKIP_SETUP:-}" != "1" ]; then
  bash scripts/setup.sh || { echo "setup failed"; exit 1; }
fi
export PATH="$PWD/node_modules/.bin:$PATH"
deno task check || { echo "static checks failed (deno task check)"; exit 1; }
bash scripts/compile.sh || { echo "compile failed (deno task compile)"; exit 1; }
mkdir -p .scratch
log=.scratch/test.log
NO_COLOR=1 deno test -A --parallel "${@:-tests/}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E '^(ok|FAILED) \|' "$log" | tail -n 1)
passed=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$summary")
failed=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$summary")
echo "tests: ${passed:-0} passed, ${failed:-0} failed"
exit "$status"
