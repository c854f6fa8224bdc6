#!/usr/bin/env bash
# ResNet-50 training throughput on one GPU: lockstep, run from the device bundle, against PyTorch
# (bench/resnet50_gpu_peer.py) in float32 and mixed precision, alternated over rounds; the best of each counts.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/gpu_resnet50.sh [--bundle DIR] [--python PY] [--batch_sizes 64,128] [--rounds R] [--steps S]
                             [--warmup W] [--image_size N] [--budget SECONDS] [--lockstep_args ARGS]
                             [--work_dir DIR] [-h]

Times ResNet-50 training (synthetic data, 1000 labels, SGD lr 0.1, momentum 0.9, weight decay 1e-4) on GPU 0 of
the GPU machine. Each round runs, for each batch size,
  lockstep fp32          <bundle>/lockstep train --model resnet50 --train_data null --gpus 0 --dtype float
                         --cudnn_workspace_limit_mb 1024
  lockstep tf32          the same with --enable_tensor_core
  lockstep bf16 mixed    the same with --dtype bfloat16 --enable_tensor_core
  lockstep fp16 mixed    the same with --dtype float16 --enable_tensor_core (float32 accumulation, as AMP)
each for 2 epochs of S steps (the first warms up; the second's inputs_per_sec from the CSV log counts), then
bench/resnet50_gpu_peer.py once for all batch sizes: PyTorch fp32 (TF32 off), tf32, AMP bf16 and AMP fp16 with
a GradScaler, each in NCHW and channels_last, W warm-up steps then S timed steps. It prints one table of the
best images/s of each configuration over the rounds, and per batch size the ratio of lockstep's best to
PyTorch's best in each precision class: fp32 (fp32 and tf32) and mixed (bf16 and fp16).

A lockstep configuration that fails is reported (mixed precision as unavailable) and not run again; the others
go on. Rounds stop early when another would pass the time budget, and a run still going at the budget is ended.

  --bundle DIR         the bundle scripts/bundle_device.sh wrote (default: $LOCKSTEP_BUNDLE, else bundle/ in
                       the repository)
  --python PY          interpreter with PyTorch built with CUDA (default python3)
  --batch_sizes LIST   comma-separated batch sizes (default 64,128)
  --rounds R           alternated rounds (default 3)
  --steps S            timed steps per measurement (default 20)
  --warmup W           PyTorch's untimed steps before each measurement (default 5; lockstep warms up for an
                       epoch of S steps)
  --image_size N       input height and width (default 224; smaller only to check that the script runs)
  --budget SECONDS     wall-clock budget of the whole run (default 450, inside the runner's 10 minutes)
  --lockstep_args ARGS more flags for every lockstep run (default "--cudnn_workspace_limit_mb 1024": PyTorch's
                       cudnn.benchmark takes what workspace it likes, and 64 MiB, the trainer's default as
                       Caffe2's, costs ResNet-50 about 13% in fp32 on an H100)
  --work_dir DIR       keep the runs' logs and outputs here (default: a temporary folder, removed at the end)
  -h, --help           this text
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${LOCKSTEP_BUNDLE:-$repo/bundle}
python=python3
batch_sizes=64,128
rounds=3
steps=20
warmup=5
image_size=224
budget=450
lockstep_args="--cudnn_workspace_limit_mb 1024"
work_dir=

positive() {  # flag value
  if ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
    echo "error: $1 needs a positive integer, got '$2'" >&2
    exit 2
  fi
}

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --bundle | --python | --batch_sizes | --rounds | --steps | --warmup | --image_size | --budget | \
      --lockstep_args | --work_dir)
      if (($# < 2)); then
        echo "error: $1 needs a value; see --help" >&2
        exit 2
      fi
      case $1 in
        --bundle) bundle=$2 ;;
        --python) python=$2 ;;
        --batch_sizes)
          if ! [[ $2 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
            echo "error: --batch_sizes needs positive integers separated by commas, got '$2'" >&2
            exit 2
          fi
          batch_sizes=$2
          ;;
        --rounds) positive "$1" "$2"; rounds=$2 ;;
        --steps) positive "$1" "$2"; steps=$2 ;;
        --warmup)
          if ! [[ $2 =~ ^[0-9]+$ ]]; then
            echo "error: --warmup needs an integer >= 0, got '$2'" >&2
            exit 2
          fi
          warmup=$2
          ;;
        --image_size) positive "$1" "$2"; image_size=$2 ;;
        --budget) positive "$1" "$2"; budget=$2 ;;
        --lockstep_args) lockstep_args=$2 ;;
        --work_dir) work_dir=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done

if [[ ! -x $bundle/lockstep ]]; then
  echo "error: no bundle at $bundle: run scripts/bundle_device.sh on the build machine and carry bundle/ (or pass" \
    "--bundle DIR)" >&2
  exit 2
fi
for tool in timeout awk; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 2; }
done
# The bundle must start here (its CUDA libraries found) before any run is blamed on a configuration.
if ! problem=$("$bundle/lockstep" --help 2>&1 >/dev/null); then
  echo "error: $bundle/lockstep does not start on this machine: $problem" >&2
  exit 2
fi
read -ra extra_args <<<"$lockstep_args"
IFS=, read -ra batches <<<"$batch_sizes"
peer=$repo/bench/resnet50_gpu_peer.py

if [[ -n $work_dir ]]; then
  mkdir -p "$work_dir"
  work=$(mktemp -d "$work_dir/gpu_resnet50.XXXXXX")
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_resnet50.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
results=$work/results.tsv  # side, configuration, precision class, batch size, images/s or why there is none
: >"$results"

# Prefixes each line with the seconds since the start.
stamp() {
  local line
  while IFS= read -r line; do printf '[%4ds] %s\n' "$SECONDS" "$line"; done
}

# Seconds left for a run; 0 when too few are left to start one.
seconds_left() {
  local left=$((budget - SECONDS))
  if ((left < 15)); then echo 0; else echo "$left"; fi
}

# lockstep's configurations: flags, precision class and the name in the table.
lockstep_configs=(fp32 tf32 bf16 fp16)
declare -A lockstep_flags=([fp32]="--dtype float" [tf32]="--dtype float --enable_tensor_core"
  [bf16]="--dtype bfloat16 --enable_tensor_core" [fp16]="--dtype float16 --enable_tensor_core")
declare -A lockstep_class=([fp32]=fp32 [tf32]=fp32 [bf16]=mixed [fp16]=mixed)
declare -A lockstep_name=([fp32]="lockstep fp32" [tf32]="lockstep tf32" [bf16]="lockstep bf16 mixed"
  [fp16]="lockstep fp16 mixed")
declare -A lockstep_failed=()  # configuration -> why it has no number; it is not run again
status=0

record() {  # side, name, precision class, batch size, images/s or why there is none
  printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"
}

run_lockstep() {  # round, batch size, configuration
  local round=$1 batch=$2 config=$3 dir left code=0 images_per_sec
  local -a flags
  if [[ -n ${lockstep_failed[$config]:-} ]]; then
    record lockstep "${lockstep_name[$config]}" "${lockstep_class[$config]}" "$batch" "${lockstep_failed[$config]}"
    return
  fi
  left=$(seconds_left)
  if ((left == 0)); then
    echo "round $round/$rounds, batch $batch: no time left for ${lockstep_name[$config]}" | stamp
    record lockstep "${lockstep_name[$config]}" "${lockstep_class[$config]}" "$batch" "out of time"
    return
  fi
  read -ra flags <<<"${lockstep_flags[$config]}"
  dir=$work/round$round/lockstep_${config}_b$batch
  mkdir -p "$dir"
  echo "round $round/$rounds, batch $batch: ${lockstep_name[$config]}" | stamp
  timeout -k 10 "$left" "$bundle/lockstep" train --model resnet50 --train_data null --gpus 0 --batch_size "$batch" \
    --image_size "$image_size" --num_labels 1000 --base_learning_rate 0.1 --momentum 0.9 --weight_decay 1e-4 \
    --epoch_size $((batch * steps)) --num_epochs 2 --log_dir "$dir" "${flags[@]}" "${extra_args[@]}" \
    >"$dir/output.txt" 2>&1 || code=$?
  if ((code == 0)); then
    # Epoch 2's inputs_per_sec (column 6; column 8 is the epoch) in the CSV log, after the argument line and
    # the header.
    images_per_sec=$(awk -F, 'FNR > 2 && $8 >= 2 && $6 > best { best = $6 }
      END { if (best == "") exit 1; printf "%.2f\n", best }' "$dir"/resnet50_*.log 2>/dev/null) || code=no_log
  fi
  if [[ $code == 0 ]]; then
    echo "${lockstep_name[$config]}, batch $batch: $images_per_sec images/s" | stamp
    record lockstep "${lockstep_name[$config]}" "${lockstep_class[$config]}" "$batch" "$images_per_sec"
    return
  fi
  case $code in
    124 | 137) lockstep_failed[$config]="timed out" ;;
    no_log) lockstep_failed[$config]="no epoch 2 in its log" ;;
    *) lockstep_failed[$config]="exit status $code" ;;
  esac
  echo "${lockstep_name[$config]}, batch $batch: ${lockstep_failed[$config]}; the end of its output:" | stamp
  tail -n 5 "$dir/output.txt" | sed 's/^/    /'
  # Mixed precision may not be there yet: that is worth a note, not a failed run.
  if [[ ${lockstep_class[$config]} == mixed && ${lockstep_failed[$config]} != "timed out" ]]; then
    lockstep_failed[$config]=unavailable
  else
    status=1
  fi
  echo "${lockstep_name[$config]}: ${lockstep_failed[$config]}, not run again" | stamp
  record lockstep "${lockstep_name[$config]}" "${lockstep_class[$config]}" "$batch" "${lockstep_failed[$config]}"
}

run_pytorch() {  # round
  local round=$1 output left code
  output=$work/round$round/pytorch.txt
  mkdir -p "${output%/*}"
  left=$(seconds_left)
  if ((left == 0)); then
    echo "round $round/$rounds: no time left for PyTorch" | stamp
    return
  fi
  echo "round $round/$rounds: pytorch, batch sizes $batch_sizes" | stamp
  set +e
  timeout -k 10 "$left" "$python" -u "$peer" --batch_sizes "$batch_sizes" --steps "$steps" --warmup "$warmup" \
    --image_size "$image_size" 2>&1 | tee "$output" | stamp
  code=${PIPESTATUS[0]}
  set -e
  # Lines `result <precision> <layout> <batch> <class> <images/s> ...`; those printed before a failure count.
  awk '$1 == "result" { printf "pytorch\tpytorch %s %s\t%s\t%s\t%s\n", $2, $3, $5, $4, $6 }' "$output" >>"$results"
  if ((code != 0)); then
    echo "pytorch exited with status $code (124: out of time)" | stamp
    status=1
  fi
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) || true
echo "ResNet-50 training throughput on ${gpu:-GPU 0}: batch sizes $batch_sizes, ${image_size}x$image_size," \
  "$rounds round(s) of $steps timed steps, budget ${budget} s; bundle $bundle" | stamp

round_seconds=0
for ((round = 1; round <= rounds; ++round)); do
  if ((round > 1 && SECONDS + round_seconds > budget)); then
    echo "stopping after $((round - 1)) round(s): another ($round_seconds s) would pass the ${budget} s budget" | stamp
    break
  fi
  round_start=$SECONDS
  for batch in "${batches[@]}"; do
    for config in "${lockstep_configs[@]}"; do run_lockstep "$round" "$batch" "$config"; done
  done
  run_pytorch "$round"
  round_seconds=$((SECONDS - round_start))
done

# The table: best images/s of each configuration per batch size (or why there is none), then the ratios of the
# best lockstep to the best PyTorch configuration per precision class.
echo
echo "ResNet-50 training, images/s, best of the rounds run (${gpu:-GPU 0}, ${image_size}x$image_size," \
  "$steps timed steps)"
awk -F'\t' -v batch_list="$batch_sizes" '
  function cell(value) { return sprintf("%14s", value) }
  BEGIN { batch_count = split(batch_list, batches, ",") }
  {
    key = $2 SUBSEP $4
    if (!($2 in row)) { row[$2] = ++rows; names[rows] = $2; side[$2] = $1; class[$2] = $3 }
    if ($5 ~ /^[0-9.]+$/) {
      if (!(key in best) || $5 + 0 > best[key]) best[key] = $5 + 0
      side_key = $1 SUBSEP $3 SUBSEP $4
      if (!(side_key in top) || $5 + 0 > top[side_key]) { top[side_key] = $5 + 0; top_name[side_key] = $2 }
    } else if (!(key in note)) {
      note[key] = $5
    }
  }
  END {
    header = sprintf("%-34s", "configuration")
    for (i = 1; i <= batch_count; ++i) header = header cell("batch " batches[i])
    print header
    for (r = 1; r <= rows; ++r) {
      line = sprintf("%-34s", names[r])
      for (i = 1; i <= batch_count; ++i) {
        key = names[r] SUBSEP batches[i]
        line = line cell(key in best ? sprintf("%.1f", best[key]) : (key in note ? note[key] : "-"))
      }
      print line
    }
    split("fp32 mixed", classes, " ")
    for (c = 1; c <= 2; ++c) {
      line = sprintf("%-34s", "lockstep / pytorch, " classes[c])
      for (i = 1; i <= batch_count; ++i) {
        ours = "lockstep" SUBSEP classes[c] SUBSEP batches[i]
        theirs = "pytorch" SUBSEP classes[c] SUBSEP batches[i]
        line = line cell((ours in top) && (theirs in top) ? sprintf("%.3f", top[ours] / top[theirs]) : "-")
      }
      print line
    }
    for (c = 1; c <= 2; ++c) {
      for (i = 1; i <= batch_count; ++i) {
        theirs = "pytorch" SUBSEP classes[c] SUBSEP batches[i]
        if (theirs in top)
          printf "best pytorch %s at batch %s: %s\n", classes[c], batches[i], top_name[theirs]
      }
    }
  }' "$results"
if [[ -n $work_dir ]]; then echo "logs and outputs: $work"; fi
exit "$status"
