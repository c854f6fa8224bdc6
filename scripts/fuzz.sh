#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ into build-asan/ (ASan + UBSan, shared with scripts/sanitize.sh) and
# runs each from its seed corpus in fuzz/corpus/<target>/; fails on any crash, leak, timeout or huge
# allocation, whose input is left in build-asan/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  cat <<'USAGE'
usage: scripts/fuzz.sh [--seconds N | --runs N] [--merge] [TARGET...]

Runs every fuzz target (or the TARGETs named, e.g. safetensors_fuzzer) one after the other.
  --seconds N  run each target for N seconds (default 20, what CI uses)
  --runs N     run each target for N executions instead
  --merge      afterwards, add the inputs that found new coverage to the repo's fuzz/corpus/<target>/
               (nothing is copied into the repo without it)
New inputs are kept between runs in build-asan/fuzz-corpus/<target>/. A longer run, as done before a
release: scripts/fuzz.sh --runs 1000000   (about 10 minutes for all targets on one core)
USAGE
}

seconds=20
runs=""
merge=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for source in fuzz/*.cc; do targets+=("$(basename "$source" .cc)"); done
fi

cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKSTEP_CUDA=OFF \
  -DLOCKSTEP_BENCH=OFF -DLOCKSTEP_FUZZ=ON > build-asan.cmake.log 2>&1 || { cat build-asan.cmake.log; exit 1; }
cmake --build build-asan -j 2 --target "${targets[@]}"

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:print_stacktrace=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:print_suppressions=0
if [[ -n "$runs" ]]; then limit=(-runs="$runs"); else limit=(-max_total_time="$seconds"); fi
mkdir -p build-asan/fuzz-artifacts build-asan/fuzz-logs
failed=0
summary=()
for target in "${targets[@]}"; do
  work=build-asan/fuzz-corpus/$target
  seeds=fuzz/corpus/$target
  mkdir -p "$work" "$seeds"
  options=("${limit[@]}" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=2048 -print_final_stats=1
           -artifact_prefix="build-asan/fuzz-artifacts/$target-")
  if [[ -f fuzz/$target.dict ]]; then options+=(-dict="fuzz/$target.dict"); fi
  log=build-asan/fuzz-logs/$target.log
  echo "fuzz: $target ${limit[*]}"
  start=$(date +%s)
  if "build-asan/$target" "${options[@]}" "$work" "$seeds" > "$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log)"
    failed=1
    tail -n 60 "$log"
  fi
  executions=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$' || true)
  summary+=("$(printf '%-24s %12s executions %6s s  %s' "$target" "${executions:-?}" "$(($(date +%s) - start))" "$result")")
  if [[ $merge -eq 1 && $result == ok ]]; then
    "build-asan/$target" -merge=1 "$seeds" "$work" >> "$log" 2>&1
  fi
done
printf '%s\n' "${summary[@]}"
exit $failed
