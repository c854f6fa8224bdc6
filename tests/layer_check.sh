#!/usr/bin/env bash
# The layers as the build enforces them (cmake/layers.cmake): for each layer, a file that includes one of its own
# headers builds against the layer's include path, and a file that includes a header of the layer above fails.
# The probe files are the build folder's layer_probes/<layer>.cc, built as the targets layer_probe_<layer>.
#
#   tests/layer_check.sh SOURCE_DIR BUILD_DIR CMAKE
set -euo pipefail
source_dir=$1 build_dir=$2 cmake=$3
log=$(mktemp)
restore() {
  for probe in "$build_dir"/layer_probes/*.cc; do echo "// written by tests/layer_check.sh" > "$probe"; done
  rm -f "$log"
}
trap restore EXIT

layers=()  # those this build has: the CUDA backend's only with CUDA
for layer in core cuda data comm ops model parallel train launch; do
  [[ -e $build_dir/layers/$layer ]] && layers+=("$layer")
done
first_header() { (cd "$source_dir/src" && ls lockstep/"$1"/*.h | head -n 1); }
builds() {  # layer header: does a file of that layer that includes that header build?
  printf '#include "%s"\n' "$2" > "$build_dir/layer_probes/$1.cc"
  "$cmake" --build "$build_dir" --target "layer_probe_$1" > "$log" 2>&1
}

failed=0
for ((i = 0; i < ${#layers[@]}; ++i)); do
  layer=${layers[i]}
  own=$(first_header "$layer")
  if builds "$layer" "$own"; then
    echo "ok: $layer includes its own $own"
  else
    echo "FAILED: $layer cannot include its own $own:"; tail -n 5 "$log"; failed=1
  fi
  ((i + 1 < ${#layers[@]})) || continue
  above=$(first_header "${layers[i + 1]}")
  if builds "$layer" "$above"; then
    echo "FAILED: $layer includes $above, a header of the layer above, and builds"; failed=1
  elif grep -q "fatal error: $above" "$log" || grep -q "'$above' file not found" "$log"; then
    echo "ok: $layer cannot include $above"
  else
    echo "FAILED: $layer including $above failed for another reason:"; tail -n 5 "$log"; failed=1
  fi
done
exit $failed
