#!/bin/bash
# Seconds per ResNet-50 training step at batch 16 total, as (a) 2 shards x 1 device (two `lockstep train`
# processes on 127.0.0.1 meeting in a file store) and as (b) 1 shard x 2 devices, alternated over rounds; the best
# round of each side counts. Each run trains 2 epochs and the second (warm) epoch's time_spent is used.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/shards_vs_devices.sh [--build DIR] [--rounds R] [--steps S] [--image_size N] [-h]

Compares the time per training step of ResNet-50, batch 16 in total, synthetic data, on CPU:
  (a) 2 shards x 1 device:  two `lockstep train` processes on 127.0.0.1 (file store, --distributed_interfaces lo),
                            --num_shards 2, --batch_size 8 and --threads 1 each
  (b) 1 shard x 2 devices:  one `lockstep train` process, --num_gpus 2, --batch_size 16, --threads 2
Each run trains 2 epochs of S steps (--epoch_size 16*S); the first warms up, the second's time_spent from the
CSV log gives seconds per step. (a) and (b) alternate for R rounds; the best round of each is reported with the
ratio (a)/(b).

  --build DIR       build folder holding `lockstep` (default: $LOCKSTEP_BUILD, else build/ in the repository)
  --rounds R        alternated rounds (default 3)
  --steps S         steps per epoch (default 6)
  --image_size N    input height and width (default 224; smaller only to check that the script runs)
  -h, --help        this text
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LOCKSTEP_BUILD:-$repo/build}
rounds=3
steps=6
image_size=224

# shellcheck source=bench/common.sh
source "$repo/bench/common.sh"

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --build | --rounds | --steps | --image_size)
      needs_value "$1" $#
      case $1 in
        --build) build=$2 ;;
        --rounds) positive "$1" "$2"; rounds=$2 ;;
        --steps) positive "$1" "$2"; steps=$2 ;;
        --image_size) positive "$1" "$2"; image_size=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see -h" >&2; exit 2 ;;
  esac
done

require_lockstep "$build"
lockstep=$build/lockstep

work=$(mktemp -d "${TMPDIR:-/tmp}/shards_vs_devices.XXXXXX")
started=()  # pids of the runs still going
seconds_per_step=
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${started[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

common=(train --model resnet50 --train_data null --use_cpu --image_size "$image_size" --num_labels 1000
  --epoch_size $((16 * steps)) --num_epochs 2 --timeout 120 --first_iter_timeout 600)

# Waits for the started runs; on a failure ends the others, shows the failed run's output and exits.
wait_started() {  # output files, in the order of ${started[@]}
  local outputs=("$@") i status
  for i in "${!started[@]}"; do
    status=0
    wait "${started[$i]}" || status=$?
    if ((status != 0)); then
      echo "error: lockstep exited with status $status; its output ends with:" >&2
      tail -n 5 "${outputs[$i]}" >&2
      exit 1
    fi
  done
  started=()
}

# Sets seconds_per_step from epoch 2's time_spent in the CSV logs of a folder (the slowest log, when the shards
# wrote one each).
read_logs() {  # log folder
  local logs=("$1"/resnet50_*.log)
  if [[ ! -f ${logs[0]} ]]; then
    echo "error: no resnet50 log in $1" >&2
    exit 1
  fi
  seconds_per_step=$(awk -F, -v steps="$steps" '
    FNR > 2 && $8 == 2 { if ($1 > worst) worst = $1; found = 1 }
    END { if (!found) exit 1; printf "%.4f\n", worst / steps }' "${logs[@]}") ||
    { echo "error: no epoch 2 row in the logs of $1" >&2; exit 1; }
}

run_shards() {  # round
  local dir=$work/a$1 shard
  mkdir -p "$dir/store" "$dir/log"
  for shard in 0 1; do
    "$lockstep" "${common[@]}" --num_shards 2 --shard_id "$shard" --run_id "shards_vs_devices_a$1" \
      --file_store_path "$dir/store" --distributed_interfaces lo --batch_size 8 --threads 1 \
      --log_dir "$dir/log" >"$dir/shard$shard.out" 2>&1 &
    started+=($!)
  done
  wait_started "$dir/shard0.out" "$dir/shard1.out"
  read_logs "$dir/log"
}

run_devices() {  # round
  local dir=$work/b$1
  mkdir -p "$dir/log"
  "$lockstep" "${common[@]}" --num_gpus 2 --batch_size 16 --threads 2 --log_dir "$dir/log" >"$dir/run.out" 2>&1 &
  started+=($!)
  wait_started "$dir/run.out"
  read_logs "$dir/log"
}

echo "ResNet-50, batch 16 total, ${image_size}x${image_size}, $steps steps per epoch (epoch 2 timed), $rounds rounds"
best_a=
best_b=
for ((round = 1; round <= rounds; ++round)); do
  # Not in $(...): the runs must be started by this shell, whose exit trap ends them.
  run_shards "$round"
  a=$seconds_per_step
  run_devices "$round"
  b=$seconds_per_step
  printf 'round %d: (a) 2 shards x 1 device %.3f s/step, (b) 1 shard x 2 devices %.3f s/step\n' "$round" "$a" "$b"
  best_a=$(awk -v x="$a" -v y="${best_a:-$a}" 'BEGIN { print (x < y ? x : y) }')
  best_b=$(awk -v x="$b" -v y="${best_b:-$b}" 'BEGIN { print (x < y ? x : y) }')
done
printf 'best: (a) 2 shards x 1 device %.3f s/step, (b) 1 shard x 2 devices %.3f s/step, ratio (a)/(b) %.3f\n' \
  "$best_a" "$best_b" "$(awk -v a="$best_a" -v b="$best_b" 'BEGIN { print a / b }')"
