#!/usr/bin/env bash
# `just check`, the full gate: every step below, then the time of every step and test tier on
# stderr (scripts/ci_times.py turns that block of a run's log into docs/benchmarks.md "CI time").
#
# A step is a recipe of the justfile. A group "A B & C D" runs its chains side by side (A then B,
# beside C then D): the builds that do not depend on one another overlap, two at a time on the
# machine's two cores, since much of a cold Go build is downloads, links and single-threaded
# packages. The control plane and the node come from one Kubernetes module, so they stay in one
# chain (the node build reuses the control plane's compiled packages from Go's build cache).
# The test step runs the suite in lanes side by side and fails past its budget
# (checkpoint_testenv.lanes, tests/lanes.toml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
just=("${JUST:-.venv/bin/just}" --justfile justfile)
steps=(
  setup
  system
  "testenv-build testenv-apiservers-build testenv-node-build image gate-image & s3-build policy-tools-build
    network-policies-build monitoring-tools-build scanners-build registry-build cosign-build
    sbom-tools-build lint typecheck fmt-check gen-check policy-check"
  "test-lanes --durations=25"
)
scratch=$(mktemp -d)
export CHECKPOINT_TEST_TIMES=$scratch/tiers.tsv # checkpoint_testenv.lanes writes it
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
started=$(date +%s)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Go's module downloads for every build, in the background, in a session of their own
setsid bash -c 'start=$(date +%s); status=0; scripts/testenv/prefetch.sh >"$1/prefetch.log" 2>&1 \
  || status=$?; echo "$status $(($(date +%s) - start))" >"$1/prefetch.done"' - "$scratch" &
prefetch=$!

summary() {
  status=$?
  kill -- "-$prefetch" 2>/dev/null || true
  {
    echo
    echo "check: time per step (wall s; CPU s: user + system of the step's processes)"
    while IFS=$'\t' read -r step wall cpu; do
      printf '  %-32s %8.0f %8.0f\n' "$step" "$wall" "$cpu"
    done <"$scratch/steps.tsv"
    if [[ -s $scratch/tiers.tsv ]]; then
      echo "check: test time per tier (tests; s of setup + call + teardown)"
      while IFS=$'\t' read -r tier count seconds; do
        printf '  %-32s %8s %8.0f\n' "$tier" "$count" "$seconds"
      done <"$scratch/tiers.tsv"
    fi
    if [[ -f $scratch/prefetch.done ]]; then
      read -r code seconds <"$scratch/prefetch.done"
      echo "check: Go module prefetch (in the background from the start): $seconds s, exit $code"
    fi
    verdict=$([[ $status == 0 ]] && echo ok || echo "exit $status")
    echo "check: $verdict after $(($(date +%s) - started)) s at $commit; $(nproc) cores; load average" \
      "before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
  } >&2
  # the tests' own closing line last, as a reader of the log expects it
  grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected)' "$scratch/test.out" \
    2>/dev/null | tail -1 || true
  rm -rf "$scratch"
}
trap summary EXIT
touch "$scratch/steps.tsv"

# run_step RECIPE [ARGS...]: one recipe, its wall and CPU seconds appended to steps.tsv
run_step() {
  local step=$1 status=0 timing wall user system
  timing=$(mktemp -p "$scratch")
  echo "check: == $*" >&2
  TIMEFORMAT='%R %U %S'
  if [[ $step == test-lanes ]]; then
    { time "${just[@]}" "$@" 2>&3 | tee "$scratch/test.out"; } 3>&2 2>"$timing" || status=$?
  else
    { time "${just[@]}" "$@" 2>&3; } 3>&2 2>"$timing" || status=$?
  fi
  read -r wall user system <"$timing" || true
  printf '%s\t%s\t%s\n' "$*" "${wall:-0}" \
    "$(awk -v u="${user:-0}" -v s="${system:-0}" 'BEGIN { print u + s }')" >>"$scratch/steps.tsv"
  if ((status != 0)); then
    echo "check: $* failed (exit $status)" >&2
  fi
  return "$status"
}

# run_chain STEP...: the steps one after another, stopping at the first that fails
run_chain() {
  local step
  for step in "$@"; do
    run_step "$step" || return
  done
}

for entry in "${steps[@]}"; do
  entry=${entry//$'\n'/ }
  if [[ $entry != *'&'* ]]; then
    read -ra words <<<"$entry"
    run_step "${words[@]}" || exit
    continue
  fi
  group_start=$(date +%s)
  IFS='&' read -ra chains <<<"$entry"
  pids=()
  for chain in "${chains[@]}"; do
    read -ra chain_steps <<<"$chain"
    run_chain "${chain_steps[@]}" &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
  done
  printf '%s\t%s\t%s\n' "(the group above, side by side)" "$(($(date +%s) - group_start))" "" \
    >>"$scratch/steps.tsv"
  ((status == 0)) || exit "$status"
done
