#!/usr/bin/env bash
# Installs what lockstep needs to build and test: Debian 12 packages, and oneDNN 3 from PyPI into
# third_party/onednn (scripts/setup_onednn.sh). `--bench` adds the PyTorch peer.
set -euo pipefail
packages=(
  build-essential cmake ccache pkg-config
  clang libclang-rt-14-dev libfuzzer-14-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev
  libgloo-dev libhiredis-dev redis-server openmpi-bin
  liblmdb-dev libleveldb-dev libsnappy-dev libturbojpeg0-dev libpng-dev libonnx-dev
  python3-lmdb python3-plyvel python3-pil python3-protobuf
  dataset-fashion-mnist python3-numpy python3-matplotlib python3-pytest pybind11-dev python3-dev
  python3-pip python3-setuptools python3-wheel python3-venv
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch libopenblas0-pthread)
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all packages present"
else
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/setup_onednn.sh"
# The readers the suite checks lockstep's TensorBoard files with (PyPI, in tests/.venv).
"$(dirname "$0")/../tests/setup_checkers.sh"
