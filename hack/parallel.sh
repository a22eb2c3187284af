#!/usr/bin/env bash
# Run make targets at the same time: hack/parallel.sh TARGET... [--nice N TARGET...]
#
# make test runs every suite side by side. The lab's tests are the critical path: one lab, one test at a time,
# partly waiting on jobs, partly on the CPU; the others (unit, e2e, static checks, the image build) can use
# whatever CPU the lab leaves. Targets after `--nice N` run with that niceness (nice(1)), so that on a 2-core
# machine they yield the CPU to the targets before it instead of slowing down its critical path.
# Every line a target prints is prefixed with its name, so the progress of each stays readable; the exit
# status is non-zero when any target failed. A failed target's output is printed again at the end (its
# FAILED/ERROR lines and its last lines), so that what went wrong is in the tail of a CI log even when
# another target finished after it.
set -uo pipefail
usage() {
  echo "usage: hack/parallel.sh TARGET... [--nice N TARGET...]" >&2
  exit 2
}
[ "$#" -gt 0 ] || usage
make_cmd=${MAKE:-make}
tail_lines=${PARALLEL_TAIL_LINES:-40}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
niceness=0
names=()
pids=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --nice)
      [ "$#" -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || usage
      niceness=$2
      shift 2
      continue
      ;;
  esac
  target=$1
  shift
  ( nice -n "$niceness" "$make_cmd" --no-print-directory "$target" 2>&1 | tee "$logs/$target.log" \
      | sed -u "s/^/[$target] /"; exit "${PIPESTATUS[0]}" ) &
  pids+=("$!")
  names+=("$target")
done
[ "${#names[@]}" -gt 0 ] || usage
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ "${#failed[@]}" -gt 0 ]; then
  for target in "${failed[@]}"; do
    echo "=== hack/parallel.sh: $target failed; its FAILED/ERROR lines and its last $tail_lines lines:" >&2
    grep -E '^(FAILED|ERROR) ' "$logs/$target.log" | sed "s/^/[$target] /" >&2
    echo "---" >&2
    tail -n "$tail_lines" "$logs/$target.log" | sed "s/^/[$target] /" >&2
  done
  echo "hack/parallel.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "hack/parallel.sh: passed: ${names[*]}"
