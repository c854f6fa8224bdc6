#!/usr/bin/env bash
# Builds lockstep's CPU code with AddressSanitizer + UndefinedBehaviorSanitizer (clang) into build-asan/ and
# runs the test suite there; any report fails the run. build-asan/ is configured with LOCKSTEP_FUZZ=ON as
# well, so scripts/fuzz.sh reuses the same objects. Extra arguments go to ctest (e.g. -R Safetensors).
# Every test runs, none is left out: about 7 minutes on 2 cores once built (the build from scratch takes about
# 15). Leak reports inside third-party libraries we do not own are suppressed by scripts/lsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKSTEP_CUDA=OFF \
  -DLOCKSTEP_BENCH=OFF -DLOCKSTEP_FUZZ=ON > build-asan.cmake.log 2>&1 || { cat build-asan.cmake.log; exit 1; }
cmake --build build-asan -j 2 --target lockstep_tests lockstep_cli
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:print_stacktrace=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:print_suppressions=0
cd build-asan
start=$(date +%s)
ctest --output-on-failure --timeout 900 "$@"
echo "sanitize: test suite passed under ASan + UBSan in $(($(date +%s) - start)) s"
