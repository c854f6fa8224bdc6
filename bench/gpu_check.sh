#!/usr/bin/env bash
# One pass over the CUDA backend on the GPU machine, from the device bundle: the GPU tests, the LeNet
# recipe on the GPU, then ResNet-50 against PyTorch (bench/gpu_resnet50.sh). Each part has its own time limit,
# so a crash or a hang in one still leaves the others' results; logs go to $OUT (or --out DIR).
set -uo pipefail

usage() {
  cat <<'EOF'
usage: bench/gpu_check.sh [--out DIR] [--tests SECONDS] [--lenet SECONDS] [--resnet SECONDS] [-h]

Runs on the GPU machine, with bundle/ (scripts/bundle_device.sh) carried:
  1. bundle/lockstep_tests on the tests that use a GPU, one process per suite (a crash ends only its suite)
  2. docs/training.md's LeNet recipe on GPU 0 (--gpus 0 instead of --use_cpu), 3 epochs, then on two logical
     devices of GPU 0 (--num_gpus 2 on one GPU) for one epoch
  3. bash bench/gpu_resnet50.sh --batch_sizes 128 --rounds 1 with the time left to it
Prints a summary last: each part's exit status and its key lines.

  --out DIR          where the logs go (default: $OUT, else a temporary folder)
  --tests SECONDS    limit of each test process (default 150)
  --lenet SECONDS    limit of each LeNet run (default 60)
  --resnet SECONDS   budget of the ResNet-50 benchmark, 0 to skip it (default 200)
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-}
tests_limit=150
lenet_limit=60
resnet_budget=200
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --out | --tests | --lenet | --resnet)
      if (($# < 2)); then echo "error: $1 needs a value; see --help" >&2; exit 2; fi
      case $1 in
        --out) out=$2 ;;
        --tests) tests_limit=$2 ;;
        --lenet) lenet_limit=$2 ;;
        --resnet) resnet_budget=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
bundle=$repo/bundle
if [[ ! -x $bundle/lockstep_tests ]]; then
  echo "error: no bundle with lockstep_tests at $bundle: run scripts/bundle_device.sh here first and carry bundle/" >&2
  exit 2
fi
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
"$bundle/lockstep" --version 2>&1 | tee -a "$summary"

# 1. The tests that use a GPU, one process per suite.
suites=("CudaOps*" "CudaTraining*" "CudaCommunicator*" "CudaCollectiveOps*"
  "DeviceTensor*:DeviceBackendRegistry*:MixedPrecision*:Version*:IntervalLog*")
for ((i = 0; i < ${#suites[@]}; ++i)); do
  log=$out/tests$i.txt
  timeout -k 5 "$tests_limit" "$bundle/lockstep_tests" --gtest_filter="${suites[i]}" >"$log" 2>&1
  code=$?
  note "tests '${suites[i]}': exit $code; $(grep -c '^\[       OK' "$log") ok," \
    "$(grep -c '^\[  FAILED  \].*(' "$log") failed, $(grep -c '^\[  SKIPPED \].*(' "$log") skipped"
  grep '^\[  FAILED  \].*(' "$log" | head -n 20 | sed 's/^/    /' | tee -a "$summary"
  if ((code != 0)) && ! grep -q '^\[  PASSED  \]\|^\[  FAILED  \] .* tests\?, listed' "$log"; then
    tail -n 8 "$log" | sed 's/^/    | /' | tee -a "$summary"
  fi
done

# 2. The LeNet recipe on the GPU.
lenet() {  # name, limit, flags...
  local name=$1 limit=$2 code
  shift 2
  local dir=$out/$name
  mkdir -p "$dir"
  timeout -k 5 "$limit" "$bundle/lockstep" train --model lenet --train_data fashion-mnist \
    --test_data fashion-mnist --batch_size 256 --base_learning_rate 0.2 --momentum 0 --weight_decay 0 \
    --log_dir "$dir" "$@" >"$dir/output.txt" 2>&1
  code=$?
  note "$name: exit $code"
  grep -i 'epoch\|error\|accuracy' "$dir/output.txt" | tail -n 6 | sed 's/^/    /' | tee -a "$summary"
}
lenet lenet_gpu0 "$lenet_limit" --gpus 0 --num_epochs 3
lenet lenet_2logical "$lenet_limit" --num_gpus 2 --num_epochs 1

# 3. ResNet-50 against PyTorch.
if ((resnet_budget > 0)); then
  bash "$repo/bench/gpu_resnet50.sh" --batch_sizes 128 --rounds 1 --budget "$resnet_budget" \
    >"$out/resnet50.txt" 2>&1
  note "resnet50: exit $?"
  tail -n 12 "$out/resnet50.txt" | sed 's/^/    /' | tee -a "$summary"
fi
echo
echo "summary ($out/summary.txt):"
cat "$summary"
