#!/usr/bin/env bash
# Peak resident memory of ResNet-50 training (224x224, 1000 labels, synthetic input, SGD with momentum):
# lockstep with its memory plan (the default) and without sharing, beside PyTorch (bench/resnet50_peer.py,
# NCHW and channels_last), each measured by /usr/bin/time -v, per batch size, in one invocation.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/common.sh
source "$repo/bench/common.sh"

usage() {
  cat <<'EOF'
usage: bench/memory_resnet50.sh [--build DIR] [--python PY] [--batch_sizes 16,32] [--threads 2]

For each batch size: lockstep train --model resnet50 --train_data null --use_cpu --image_size 224 (2 steps)
with the default memory plan and with --share_buffers=false, then bench/resnet50_peer.py (2 steps, 224x224) in
both memory formats.
Prints each run's peak RSS ("Maximum resident set size" of /usr/bin/time -v), lockstep's planned peak (its
"memory plan:" line) and, over the batch sizes, the growth per 16 images and its ratio to PyTorch's best.

  --build DIR       lockstep build folder (default: $LOCKSTEP_BUILD or build/)
  --python PY       the peer's interpreter (default: bench/.venv/bin/python, from bench/setup_torch.sh)
  --batch_sizes L   comma-separated (default 16,32)
  --threads T       threads on both sides (default 2)
EOF
}

build=${LOCKSTEP_BUILD:-$repo/build}
python=$repo/bench/.venv/bin/python
batch_sizes=16,32
threads=2
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --build | --python | --batch_sizes | --threads)
      needs_value "$1" $#
      case $1 in
        --build) build=$2 ;;
        --python) python=$2 ;;
        --batch_sizes) batch_sizes=$2 ;;
        --threads) threads=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
require_lockstep "$build"
lockstep=$build/lockstep
[[ -x $python ]] || { echo "error: no peer interpreter $python: run bench/setup_torch.sh first" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time is not installed (Debian package time)" >&2; exit 2; }
peer=$repo/bench/resnet50_peer.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs a command under /usr/bin/time -v; prints its peak RSS in MiB (or "failed").
peak_mib() {
  local out=$work/run.txt
  if /usr/bin/time -v "$@" >"$out" 2>&1; then
    awk '/Maximum resident set size/ { printf "%.0f\n", $NF / 1024 }' "$out"
  else
    echo failed
    tail -n 3 "$out" | sed 's/^/    /' >&2
  fi
}

IFS=, read -ra batches <<<"$batch_sizes"
printf '%-6s %14s %14s %16s %16s %16s\n' batch "lockstep plan" "lockstep" "lockstep unshared" "torch NCHW" \
  "torch ch_last"
declare -A ours theirs
for batch in "${batches[@]}"; do
  # 224x224 as the peer (the trainer's default is Caffe2's 227)
  common=(train --model resnet50 --train_data null --use_cpu --image_size 224 --batch_size "$batch"
    --epoch_size $((2 * batch)) --num_epochs 1 --threads "$threads" --log_dir "$work/logs")
  plan=$("$lockstep" "${common[@]}" --plan_memory 2>&1 | awk '/^memory plan: peak/ { print $4, $5 }')
  planned=$(awk -v v="${plan% *}" -v u="${plan#* }" 'BEGIN { printf "%.0f", u == "GiB" ? v * 1024 : v }')
  shared=$(peak_mib "$lockstep" "${common[@]}")
  unshared=$(peak_mib "$lockstep" "${common[@]}" --share_buffers=false)
  nchw=$(peak_mib "$python" "$peer" --threads "$threads" --batch_size "$batch" --iterations 1 --chunks 1 \
    --warmup 1 --memory_format contiguous)
  last=$(peak_mib "$python" "$peer" --threads "$threads" --batch_size "$batch" --iterations 1 --chunks 1 \
    --warmup 1 --memory_format channels_last)
  printf '%-6s %10s MiB %10s MiB %12s MiB %12s MiB %12s MiB\n' "$batch" "$planned" "$shared" "$unshared" "$nchw" \
    "$last"
  ours[$batch]=$shared
  theirs[$batch]=$(( nchw < last ? nchw : last ))
done
if ((${#batches[@]} >= 2)); then
  first=${batches[0]} last_batch=${batches[-1]}
  awk -v a="${ours[$first]}" -v b="${ours[$last_batch]}" -v c="${theirs[$first]}" -v d="${theirs[$last_batch]}" \
    -v n=$((last_batch - first)) 'BEGIN {
      ours = (b - a) / n * 16; theirs = (d - c) / n * 16
      printf "growth per 16 images: lockstep %.0f MiB, PyTorch (best format) %.0f MiB, ratio %.2f\n", ours, theirs,
        ours / theirs
      printf "at batch %d: lockstep / PyTorch best peak %.2f\n", '"$last_batch"', b / d }'
fi
