#!/usr/bin/env bash
# Where a GPU training step spends its time, per operator type: lockstep train from the device bundle with
# every CUDA launch made synchronous (CUDA_LAUNCH_BLOCKING=1), so that LOCKSTEP_PROFILE's host timers measure
# the device work of each operator. Steps are slower so than unprofiled; the shares are what count.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: bench/gpu_profile.sh [--model M] [--batch_size B] [--steps S] [--limit SECONDS] [-- FLAGS...]

Runs on the GPU machine, with bundle/ (scripts/bundle_device.sh) carried:
  bundle/lockstep train --model M --train_data null --gpus 0 --batch_size B --epoch_size B*S --num_epochs 1
      --num_labels 1000 FLAGS...
with CUDA_LAUNCH_BLOCKING=1 LOCKSTEP_PROFILE=1, and prints the per-operator-type table of the training net
(the time includes the first step's algorithm searches; use S of 10 or more so that they weigh little).

  --model M          default resnet50
  --batch_size B     default 64
  --steps S          default 10
  --limit SECONDS    time limit of the run (default 120)
  FLAGS              more flags for lockstep train, e.g. --dtype float16 --enable_tensor_core
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=resnet50
batch=64
steps=10
limit=120
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    --model | --batch_size | --steps | --limit)
      if (($# < 2)); then echo "error: $1 needs a value; see --help" >&2; exit 2; fi
      case $1 in
        --model) model=$2 ;;
        --batch_size) batch=$2 ;;
        --steps) steps=$2 ;;
        --limit) limit=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see --help (flags for lockstep go after --)" >&2; exit 2 ;;
  esac
done
if [[ ! -x $repo/bundle/lockstep ]]; then
  echo "error: no bundle at $repo/bundle: run scripts/bundle_device.sh here first and carry bundle/" >&2
  exit 2
fi
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
echo "profile: $model, batch $batch, $steps steps, flags: $*"
CUDA_LAUNCH_BLOCKING=1 LOCKSTEP_PROFILE=1 timeout -k 5 "$limit" "$repo/bundle/lockstep" train --model "$model" \
  --train_data null --gpus 0 --batch_size "$batch" --epoch_size $((batch * steps)) --num_epochs 1 \
  --num_labels 1000 --log_dir "$log_dir" "$@" 2>&1 |
  grep -E '^profile of net|^  [A-Za-z]|epoch|error' | head -n 60
