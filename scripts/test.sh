#!/usr/bin/env bash
# The whole test suite: machine setup (idempotent), static checks, the compiled binary, then unit,
# integration (real podman/docker containers, real MCP servers from npm) and e2e (compiled binary, real
# MCP clients). Each test file runs in its own process (two at a time): some tests change process-wide
# state such as proxy variables, and sandboxes are told apart by their owner's pid.
# Ends with one plain "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${CODEMODE_SKIP_SETUP:-}" != "1" ]; then
  bash scripts/setup.sh || { echo "setup failed"; exit 1; }
fi
export PATH="$PWD/node_modules/.bin:$PATH" NO_COLOR=1
deno task check || { echo "static checks failed (deno task check)"; exit 1; }
bash scripts/compile.sh || { echo "compile failed (deno task compile)"; exit 1; }

logs=.scratch/test-logs
rm -rf "$logs" && mkdir -p "$logs"
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(find tests -name '*_test.ts' | sort); fi
started=$SECONDS
printf '%s\n' "${files[@]}" | xargs -P "${CODEMODE_TEST_JOBS:-2}" -I{} bash -c \
  'log="$0/$(echo "$1" | tr / _).log"; deno test -A "$1" > "$log" 2>&1; echo $? > "$log.rc"' "$logs" {}

passed=0 failed=0 ignored=0 broken=()
for f in "${files[@]}"; do
  log="$logs/$(echo "$f" | tr / _).log"
  cat "$log"
  summary=$(grep -E '^(ok|FAILED) \|' "$log" | tail -n 1)
  p=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$summary")
  x=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$summary")
  i=$(sed -nE 's/.* ([0-9]+) ignored.*/\1/p' <<<"$summary")
  passed=$((passed + ${p:-0})) failed=$((failed + ${x:-0})) ignored=$((ignored + ${i:-0}))
  if [ "$(cat "$log.rc")" != 0 ]; then
    broken+=("$f")
    [ -z "$summary" ] && failed=$((failed + 1))
  fi
done
echo
echo "test files: ${#files[@]}, ignored tests: $ignored, time: $((SECONDS - started))s"
# What failed, again at the end: CI shows the tail of a long log, and the reasons are what it needs.
for f in "${broken[@]}"; do
  log="$logs/$(echo "$f" | tr / _).log"
  echo "==> why $f failed"
  if grep -q '^ ERRORS ' "$log"; then sed -n '/^ ERRORS /,/^FAILED |/p' "$log" | head -n 150; else tail -n 60 "$log"; fi
done
for f in "${broken[@]}"; do echo "FAILED: $f"; done
echo "tests: $passed passed, $failed failed"
[ ${#broken[@]} -eq 0 ]
