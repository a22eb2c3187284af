#!/usr/bin/env bash
# Run make targets at the same time (make test runs e2e next to lab-test: the local default's end-to-end tests
# and the lab's multi-host tests share nothing but the CPU, and most of their time is spent waiting on jobs).
# Every line a target prints is prefixed with its name, so the progress of each stays readable; the exit
# status is non-zero when any target failed, and each failed target is named at the end.
set -uo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: hack/parallel.sh TARGET..." >&2
  exit 2
fi
make_cmd=${MAKE:-make}
pids=()
for target in "$@"; do
  ( "$make_cmd" --no-print-directory "$target" 2>&1 | sed -u "s/^/[$target] /"; exit "${PIPESTATUS[0]}" ) &
  pids+=("$!")
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${@:$((i + 1)):1}")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "hack/parallel.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "hack/parallel.sh: passed: $*"
