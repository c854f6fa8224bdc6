#!/usr/bin/env bash
# Builds lockstep and runs the whole test suite; arguments go to ctest (e.g. -R ConvOp). `--numeric` runs
# only the tests whose figures depend on the CPU's kernels (operators, gradient checks, data and model
# parallel, trainer equivalence, Python against the command line): CI runs them again with
# ONEDNN_MAX_CPU_ISA=AVX2, as most CPUs have no AVX-512 and oneDNN picks its kernels by CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly numeric='Op\.|Ops\.|Gradient|BN|Stats|DataParallel|ModelParallel|Memonger|MixedPrecision|Trainer\.|ModelZoo|Cuda|Python\.'
arguments=()
for argument in "$@"; do
  if [[ $argument == --numeric ]]; then arguments+=(-R "$numeric"); else arguments+=("$argument"); fi
done
scripts/build.sh
cd build
ctest --output-on-failure --timeout 300 "${arguments[@]}"
