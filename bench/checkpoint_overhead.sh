#!/bin/bash
# Images/s of ResNet-50 training without and with mid-epoch checkpoints (--checkpoint_every_iters), alternated
# over rounds; the best round of each side counts. Both sides write the per-epoch checkpoints.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/checkpoint_overhead.sh [--build DIR] [--rounds R] [--steps S] [--every N] [--image_size N] [-h]

What a checkpoint written in the background costs training: ResNet-50, batch 16, synthetic data, one CPU
device with all cores, 2 epochs of S steps (--epoch_size 16*S), --save_model_name in both runs, and
  (a) no mid-epoch checkpoint
  (b) --checkpoint_every_iters N (the default --keep_checkpoints 2)
Epoch 2's images/s (inputs_per_sec of the CSV log: the warm epoch, its mid-epoch checkpoints included) and the
wall seconds of the whole run are reported for each; (a) and (b) alternate for R rounds, the best round of
each counts, and the ratio (b)/(a) of images/s is printed. The defaults are scaled down from a checkpoint every
50 steps so that a round takes about a minute and a half on 2 cores: 8 steps an epoch, a checkpoint every 4
(steps 4 and 12; 8 and 16 end an epoch, whose checkpoint stands for it).

  --build DIR       build folder holding `lockstep` (default: $LOCKSTEP_BUILD, else build/ in the repository)
  --rounds R        alternated rounds (default 2)
  --steps S         steps per epoch (default 8)
  --every N         --checkpoint_every_iters of (b) (default 4)
  --image_size N    input height and width (default 224; smaller only to check that the script runs)
  -h, --help        this text
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOCKSTEP_BUILD:-$repo/build}
rounds=2
steps=8
every=4
image_size=224

# shellcheck source=bench/common.sh
source "$repo/bench/common.sh"

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --build | --rounds | --steps | --every | --image_size)
      needs_value "$1" $#
      case $1 in
        --build) build=$2 ;;
        --rounds) positive "$1" "$2"; rounds=$2 ;;
        --steps) positive "$1" "$2"; steps=$2 ;;
        --every) positive "$1" "$2"; every=$2 ;;
        --image_size) positive "$1" "$2"; image_size=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see -h" >&2; exit 2 ;;
  esac
done

require_lockstep "$build"
lockstep=$build/lockstep

work=$(mktemp -d "${TMPDIR:-/tmp}/checkpoint_overhead.XXXXXX")
trap 'rm -rf "$work"' EXIT

common=(train --model resnet50 --train_data null --use_cpu --image_size "$image_size" --num_labels 1000
  --batch_size 16 --epoch_size $((16 * steps)) --num_epochs 2 --save_model_name resnet50)

images_per_sec=
wall_seconds=
checkpoints=
# Runs one side in a fresh folder; sets images_per_sec (epoch 2), wall_seconds and checkpoints (files left).
run() {  # folder, extra flags...
  local dir=$1 start end status=0
  shift
  mkdir -p "$dir"
  start=$(date +%s.%N)
  "$lockstep" "${common[@]}" --file_store_path "$dir" --log_dir "$dir" "$@" >"$dir/run.out" 2>&1 || status=$?
  end=$(date +%s.%N)
  if ((status != 0)); then
    echo "error: lockstep exited with status $status; its output ends with:" >&2
    tail -n 5 "$dir/run.out" >&2
    exit 1
  fi
  images_per_sec=$(awk -F, 'FNR > 2 && $8 == 2 { print $6; found = 1 } END { if (!found) exit 1 }' \
    "$dir"/resnet50_*.log) || { echo "error: no epoch 2 row in the log of $dir" >&2; exit 1; }
  wall_seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  checkpoints=$(cd "$dir" && ls -- *.safetensors | paste -sd ' ' -)
}

echo "ResNet-50, batch 16, ${image_size}x${image_size}, 2 epochs of $steps steps, mid-epoch checkpoint every" \
  "$every steps (scaled down from every 50), $rounds rounds, load: $(uptime | sed 's/.*load/load/')"
best_a=0
best_b=0
for ((round = 1; round <= rounds; ++round)); do
  run "$work/a$round"
  a=$images_per_sec
  wall_a=$wall_seconds
  run "$work/b$round" --checkpoint_every_iters "$every"
  b=$images_per_sec
  printf 'round %d: (a) none %.2f img/s (%s s run), (b) every %d steps %.2f img/s (%s s run; left: %s)\n' \
    "$round" "$a" "$wall_a" "$every" "$b" "$wall_seconds" "$checkpoints"
  best_a=$(awk -v x="$a" -v y="$best_a" 'BEGIN { print (x > y ? x : y) }')
  best_b=$(awk -v x="$b" -v y="$best_b" 'BEGIN { print (x > y ? x : y) }')
done
printf 'best: (a) no mid-epoch checkpoint %.2f img/s, (b) every %d steps %.2f img/s, ratio (b)/(a) %.3f\n' \
  "$best_a" "$every" "$best_b" "$(awk -v a="$best_a" -v b="$best_b" 'BEGIN { print b / a }')"
