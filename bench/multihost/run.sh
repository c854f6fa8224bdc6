#!/bin/bash
# N shards of `lockstep train`, each in its own network namespace, joined by a Linux bridge over veth links
# shaped with tc (bandwidth and one-way latency); per configuration (and gradient bucket plan) the step time,
# the allreduce time per step and the share of it hidden behind other work (from shard 0's LOCKSTEP_TRACE).
# Needs root (ip netns, tc).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/multihost/run.sh [options] [--sweep] [-h]

Runs N shards of `lockstep train` on CPU, shard k in network namespace lsbench_<pid>_<k> with address
198.18.0.(k+1)/24 on its veth, the veths' other ends on a bridge in namespace lsbench_<pid>_br. Each shard's
veth gets a tc qdisc on egress: `netem delay L rate G` where the kernel has netem. Without netem it gets
`tbf rate G`, and the latency is added on the way in instead: an iptables-legacy NFQUEUE rule hands the
packets arriving on the veth to delay.py, which accepts each L ms after it came (needs iptables-legacy with
the NFQUEUE target; else no latency is added and the latency column says "none"). The shards meet in a file
store in a temporary folder.
Each run trains 2 epochs of S steps; epoch 2's time_spent from the CSV logs (the slowest shard) gives the
step time, shard 0's trace of epoch 2 the allreduce time per step and its hidden share (trace_summary.py);
delay_cpu_s is the CPU time per step of the delay.py processes (all shards, both epochs).

  --build DIR          build folder holding `lockstep` (default: $LOCKSTEP_BUILD, else build/ in the repository)
  --shards N           shards (default 2)
  --gbit G             link bandwidth in Gbit/s (default 10)
  --latency_ms L       one-way latency added on each shard's link, in ms; 0 adds none (default 0.1)
  --algorithm A        ring, ring_chunked, halving_doubling or bcube (even N) (default halving_doubling)
  --bucket_mb B        train --allreduce_bucket_mb (default 8)
  --tail_mb T          train --allreduce_tail_bucket_mb (default 0)
  --channels K         train --allreduce_channels (default 1)
  --allreduce_dtype D  train --allreduce_dtype: float, bfloat16 or float16, the dtype the gradients cross the
                       links in (default float)
  --model M            lockstep model (default resnet18)
  --image_size N       input height and width (default 64)
  --batch_size B       images per shard and step (default 8)
  --steps S            steps per epoch (default 5)
  --run_timeout SECS   limit of each shard's run (default 180)
  --sweep              run the matrix: shards (--sweep_shards), links (--sweep_gbit), latencies
                       (--sweep_latencies), algorithms (--sweep_algorithms), bucket plans (--sweep_plans),
                       wire dtypes (--sweep_dtypes)
  --sweep_shards LIST  shard counts of the sweep, comma-separated (default 2,3)
  --sweep_gbit LIST    link bandwidths of the sweep in Gbit/s, comma-separated (default 1,10)
  --sweep_latencies LIST  one-way latencies of the sweep in ms, comma-separated; 0 adds none (default 0.1,1)
  --sweep_algorithms LIST  algorithms of the sweep, comma-separated (default ring,ring_chunked,halving_doubling,bcube)
  --sweep_plans LIST   bucket plans of the sweep, comma-separated B:T:K (bucket MiB, tail MiB, channels);
                       default the one that --bucket_mb, --tail_mb and --channels give
  --sweep_dtypes LIST  wire dtypes, comma-separated, each run after the other on the same configuration (also
                       without --sweep); default --allreduce_dtype's
  --keep DIR           copy every run's output, logs and traces to DIR
  -h, --help           this text
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${LOCKSTEP_BUILD:-$repo/build}
shards=2
gbit=10
latency_ms=0.1
algorithm=halving_doubling
model=resnet18
image_size=64
batch_size=8
steps=5
run_timeout=180
sweep=0
sweep_shards=2,3
sweep_gbit=1,10
sweep_latencies=0.1,1
sweep_algorithms=ring,ring_chunked,halving_doubling,bcube
bucket_mb=8
tail_mb=0
channels=1
sweep_plans=
allreduce_dtype=float
sweep_dtypes=
keep=

# shellcheck source=bench/common.sh
source "$repo/bench/common.sh"
number() {  # flag value
  if ! [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "error: $1 needs a non-negative number, got '$2'" >&2
    exit 2
  fi
}

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --sweep) sweep=1; shift ;;
    --build | --shards | --gbit | --latency_ms | --algorithm | --model | --image_size | --batch_size | --steps | \
      --run_timeout | --sweep_shards | --sweep_gbit | --sweep_latencies | --sweep_algorithms | --bucket_mb | \
      --tail_mb | --channels | --sweep_plans | --keep | --allreduce_dtype | --sweep_dtypes)
      needs_value "$1" $#
      case $1 in
        --build) build=$2 ;;
        --shards) positive "$1" "$2"; shards=$2 ;;
        --gbit) number "$1" "$2"; gbit=$2 ;;
        --latency_ms) number "$1" "$2"; latency_ms=$2 ;;
        --algorithm) algorithm=$2 ;;
        --model) model=$2 ;;
        --image_size) positive "$1" "$2"; image_size=$2 ;;
        --batch_size) positive "$1" "$2"; batch_size=$2 ;;
        --steps) positive "$1" "$2"; steps=$2 ;;
        --run_timeout) positive "$1" "$2"; run_timeout=$2 ;;
        --sweep_shards) sweep_shards=$2 ;;
        --sweep_gbit) sweep_gbit=$2 ;;
        --sweep_latencies) sweep_latencies=$2 ;;
        --sweep_algorithms) sweep_algorithms=$2 ;;
        --bucket_mb) number "$1" "$2"; bucket_mb=$2 ;;
        --tail_mb) number "$1" "$2"; tail_mb=$2 ;;
        --channels) positive "$1" "$2"; channels=$2 ;;
        --sweep_plans) sweep_plans=$2 ;;
        --keep) keep=$2 ;;
        --allreduce_dtype) allreduce_dtype=$2 ;;
        --sweep_dtypes) sweep_dtypes=$2 ;;
      esac
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see -h" >&2; exit 2 ;;
  esac
done

check_algorithm() {  # flag algorithm
  case $2 in
    ring | ring_chunked | halving_doubling | bcube) ;;
    *) echo "error: $1 takes ring, ring_chunked, halving_doubling or bcube, got '$2'" >&2; exit 2 ;;
  esac
}
check_algorithm --algorithm "$algorithm"
IFS=, read -r -a algorithms <<<"$sweep_algorithms"
for algo in "${algorithms[@]}"; do check_algorithm --sweep_algorithms "$algo"; done
IFS=, read -r -a counts <<<"$sweep_shards"
for n in "${counts[@]}"; do positive --sweep_shards "$n"; done
IFS=, read -r -a rates <<<"$sweep_gbit"
for rate in "${rates[@]}"; do number --sweep_gbit "$rate"; done
IFS=, read -r -a delays <<<"$sweep_latencies"
for delay in "${delays[@]}"; do number --sweep_latencies "$delay"; done
IFS=, read -r -a plans <<<"${sweep_plans:-$bucket_mb:$tail_mb:$channels}"
for plan in "${plans[@]}"; do
  if ! [[ $plan =~ ^[0-9]+(\.[0-9]+)?:[0-9]+(\.[0-9]+)?:[1-9][0-9]*$ ]]; then
    echo "error: --sweep_plans takes bucket_mb:tail_mb:channels triples such as 8:1:2, got '$plan'" >&2
    exit 2
  fi
done
IFS=, read -r -a dtypes <<<"${sweep_dtypes:-$allreduce_dtype}"
for dtype in "${dtypes[@]}"; do
  case $dtype in
    float | bfloat16 | float16) ;;
    *) echo "error: --allreduce_dtype and --sweep_dtypes take float, bfloat16 or float16, got '$dtype'" >&2; exit 2 ;;
  esac
done
require_lockstep "$build"
lockstep=$build/lockstep
if ((EUID != 0)); then
  echo "error: needs root (ip netns, tc)" >&2
  exit 2
fi
for tool in ip tc timeout /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 2; }
done

prefix=lsbench_$$
runs=0
work=$(mktemp -d "${TMPDIR:-/tmp}/lsbench.XXXXXX")
started=()     # pids of the shard runs still going
delayers=()    # pids of the delay.py processes of the current namespaces
namespaces=()  # namespaces that exist
stop_delayers() {
  local pid
  for pid in "${delayers[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${delayers[@]}"; do wait "$pid" 2>/dev/null || true; done
  delayers=()
}
cleanup() {
  local pid ns
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${started[@]}"; do wait "$pid" 2>/dev/null || true; done
  started=()
  stop_delayers
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
  namespaces=()
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# How latency is added: netem where the kernel has it (some VMs' kernels do not), else an NFQUEUE rule and
# delay.py where iptables-legacy has the target, else not at all. Probed on a veth in a scratch namespace.
latency_via=none
ip netns add "${prefix}_probe"
namespaces+=("${prefix}_probe")
ip -n "${prefix}_probe" link add p0 type veth peer name p1
if tc -n "${prefix}_probe" qdisc add dev p0 root netem delay 1ms rate 1gbit 2>/dev/null; then
  latency_via=netem
elif command -v iptables-legacy >/dev/null &&
  ip netns exec "${prefix}_probe" iptables-legacy -A INPUT -i p0 -j NFQUEUE --queue-num 0 2>/dev/null; then
  latency_via=nfqueue
fi
ip netns delete "${prefix}_probe"
namespaces=()
case $latency_via in
  nfqueue) echo "note: this kernel has no netem qdisc: links are shaped with tbf, latency is added by delay.py" >&2 ;;
  none) echo "note: no netem qdisc and no iptables-legacy NFQUEUE target: links are shaped with tbf (bandwidth" \
    "only), no latency is added" >&2 ;;
esac

# Starts delay.py in namespace ns behind an NFQUEUE rule on its veth; waits until it has bound the queue.
start_delayer() {  # namespace latency_ms
  local ns=$1 delay=$2 log=$work/delay_$1.out i
  ip netns exec "$ns" iptables-legacy -A INPUT -i veth0 -j NFQUEUE --queue-num 0
  ip netns exec "$ns" /usr/bin/python3 "$repo/bench/multihost/delay.py" --delay_ms "$delay" >"$log" 2>&1 &
  delayers+=($!)
  for ((i = 0; i < 100; ++i)); do
    grep -q bound "$log" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "error: delay.py did not start in $ns:" >&2
  cat "$log" >&2
  exit 1
}

# CPU seconds per step the delay.py processes of the current namespaces have used (all shards, both epochs;
# they share the cores with the shards), "n/a" without them.
delayer_cpu_per_step() {
  local pid ticks=0
  ((${#delayers[@]})) || { echo n/a; return; }
  for pid in "${delayers[@]}"; do  # utime + stime, fields 14 and 15 (the command name has no spaces)
    ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
  done
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v s=$((2 * steps)) 'BEGIN { printf "%.4f\n", t / hz / s }'
}

# Tears down the namespaces of the previous configuration and builds n shard namespaces on a bridge.
setup_network() {  # shards gbit latency_ms
  local n=$1 rate=$2 delay=$3 k ns br=${prefix}_br
  stop_delayers
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
  namespaces=()
  ip netns add "$br"
  namespaces+=("$br")
  ip -n "$br" link set lo up
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for ((k = 0; k < n; ++k)); do
    ns=${prefix}_$k
    ip netns add "$ns"
    namespaces+=("$ns")
    ip -n "$ns" link set lo up
    ip -n "$ns" link add veth0 type veth peer name "b$k" netns "$br"
    ip -n "$br" link set "b$k" master br0
    ip -n "$br" link set "b$k" up
    ip -n "$ns" addr add "198.18.0.$((k + 1))/24" dev veth0
    ip -n "$ns" link set veth0 up
    if [[ $latency_via == netem ]]; then
      tc -n "$ns" qdisc add dev veth0 root netem delay "${delay}ms" rate "${rate}gbit" limit 100000
    else
      if [[ $latency_via != none && $(awk -v l="$delay" 'BEGIN { print (l > 0) }') == 1 ]]; then
        start_delayer "$ns" "$delay"
      fi
      # burst: at least one 64 KiB GSO packet, else 1 ms of traffic.
      tc -n "$ns" qdisc add dev veth0 root tbf rate "${rate}gbit" \
        burst "$(awk -v g="$rate" 'BEGIN { b = g * 1e9 / 8 / 1000; printf "%d", (b > 65536 ? b : 65536) }')" \
        latency 100ms
    fi
  done
}

# Waits for the started runs; on a failure shows the failed run's output and returns 1.
wait_started() {  # output files, in the order of ${started[@]}
  local outputs=("$@") i status failed=0
  for i in "${!started[@]}"; do
    status=0
    wait "${started[$i]}" || status=$?
    if ((status != 0 && !failed)); then
      echo "error: shard $i exited with status $status; its output ends with:" >&2
      tail -n 5 "${outputs[$i]}" >&2
      failed=1
    fi
  done
  started=()
  return "$failed"
}

header() {
  printf '%-6s %-8s %-11s %-16s %-9s %-7s %-8s %-9s %-10s %-14s %-8s %s\n' shards Gbit/s latency_ms algorithm \
    bucket_mb tail_mb channels wire step_s allreduce_s hidden delay_cpu_s
}

# One configuration: prints its row.
run_config() {  # shards gbit latency_ms algorithm bucket_mb:tail_mb:channels wire_dtype
  local n=$1 rate=$2 delay=$3 algo=$4 plan=$5 wire=$6 k dir outputs=() step summary bucket tail channels
  IFS=: read -r bucket tail channels <<<"$plan"
  runs=$((runs + 1))  # a plan may be listed twice: each run gets its own folder and run id
  local tag=${runs}_n${n}_g${rate}_l${delay}_${algo}_b${bucket}_t${tail}_c${channels}_$wire
  dir=$work/$tag
  mkdir -p "$dir/store" "$dir/log"
  setup_network "$n" "$rate" "$delay"
  for ((k = 0; k < n; ++k)); do
    LOCKSTEP_TRACE=$dir/trace$k ip netns exec "${prefix}_$k" timeout "$run_timeout" "$lockstep" train \
      --model "$model" --image_size "$image_size" --batch_size "$batch_size" --num_labels 1000 \
      --train_data null --use_cpu --threads 1 --epoch_size $((n * batch_size * steps)) --num_epochs 2 \
      --num_shards "$n" --shard_id "$k" --run_id "lsbench_$$_$tag" --file_store_path "$dir/store" \
      --distributed_interfaces veth0 --allreduce_algorithm "$algo" --allreduce_bucket_mb "$bucket" \
      --allreduce_tail_bucket_mb "$tail" --allreduce_channels "$channels" --allreduce_dtype "$wire" \
      --timeout 60 --first_iter_timeout 120 \
      --log_dir "$dir/log" --iter_log "$dir/iter.csv" --log_every_iters 1 >"$dir/shard$k.out" 2>&1 &
    started+=($!)
    outputs+=("$dir/shard$k.out")
  done
  local latency_column=$delay
  [[ $latency_via != none ]] || latency_column=none
  if ! wait_started "${outputs[@]}"; then
    printf '%-6s %-8s %-11s %-16s %-9s %-7s %-8s %-9s failed\n' "$n" "$rate" "$latency_column" "$algo" "$bucket" \
      "$tail" "$channels" "$wire"
    [[ -z $keep ]] || { mkdir -p "$keep"; cp -r "$dir" "$keep/"; }
    return 0
  fi
  step=$(awk -F, -v steps="$steps" '
    FNR > 2 && $8 == 2 { if ($1 > worst) worst = $1; found = 1 }
    END { if (!found) exit 1; printf "%.4f\n", worst / steps }' "$dir"/log/*.log) ||
    { echo "error: no epoch 2 row in the logs of $dir/log" >&2; return 1; }
  summary=$(/usr/bin/python3 "$repo/bench/multihost/trace_summary.py" --skip "$steps" --json "$dir/trace0.train.json")
  /usr/bin/python3 - "$summary" "$n" "$rate" "$latency_column" "$algo" "$bucket" "$tail" "$channels" "$wire" \
    "$step" "$(delayer_cpu_per_step)" <<'EOF'
import json, sys
s = json.loads(sys.argv[1])
n, rate, latency, algo, bucket, tail, channels, wire, step, delay_cpu = sys.argv[2:]
hidden = "n/a" if s["hidden"] is None else f"{100 * s['hidden']:.0f}%"
print(f"{n:<6} {rate:<8} {latency:<11} {algo:<16} {bucket:<9} {tail:<7} {channels:<8} {wire:<9} "
      f"{float(step):<10.3f} {s['allreduce_s']:<14.3f} {hidden:<8} {delay_cpu}")
EOF
  [[ -z $keep ]] || { mkdir -p "$keep"; cp -r "$dir" "$keep/"; }
}

echo "$model, batch $batch_size per shard, ${image_size}x${image_size}, $steps steps per epoch (epoch 2 timed)," \
  "1 thread per shard; load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
header
if ((sweep)); then
  for n in "${counts[@]}"; do
    for rate in "${rates[@]}"; do
      for delay in "${delays[@]}"; do
        [[ $latency_via != none || $delay == "${delays[0]}" ]] || continue  # no latency to vary
        for algo in "${algorithms[@]}"; do
          if [[ $algo == bcube ]] && ((n % 2)); then continue; fi
          for plan in "${plans[@]}"; do
            for dtype in "${dtypes[@]}"; do run_config "$n" "$rate" "$delay" "$algo" "$plan" "$dtype"; done
          done
        done
      done
    done
  done
else
  if [[ $algorithm == bcube ]] && ((shards % 2)); then
    echo "error: bcube needs an even shard count" >&2
    exit 2
  fi
  for plan in "${plans[@]}"; do
    for dtype in "${dtypes[@]}"; do run_config "$shards" "$gbit" "$latency_ms" "$algorithm" "$plan" "$dtype"; done
  done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
