#!/usr/bin/env bash
# Creates the virtual environment of the current PyTorch peer: torch from PyPI for CPU benchmarks, installed
# beside Debian's python3-torch (the old peer), which it leaves alone.
#
#   bench/setup_torch.sh [--venv DIR] [--version V]      # defaults: bench/.venv, 2.15.0
#
# PyPI has one Linux torch wheel, built for CUDA, and it is installed with its dependencies, the CUDA
# packages included (cuda-toolkit, nvidia-cudnn, nccl, nvshmem, cusparselt, triton: the environment takes about 5.5 GB). The
# CPU benchmarks do not use them, but `--no-deps` with only the pure-Python dependencies does not work:
# torch/lib/libtorch_cuda.so is linked against libcufile, libcusparseLt, libnvshmem_host and the CUDA
# runtime, so `import torch` fails without them. numpy is added for the LeNet peer. Everything comes from
# PyPI. A second run with the right version present installs nothing and prints the same summary.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv="$bench_dir/.venv"
version="2.15.0"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --venv) venv="${2:?--venv needs a folder}"; shift 2 ;;
    --version) version="${2:?--version needs a torch version}"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup_torch: unknown argument '$1' (expected --venv DIR, --version V)" >&2; exit 2 ;;
  esac
done
python="$venv/bin/python"

installed_version() {
  [[ -x "$python" ]] || return 0
  "$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true
}

if [[ "$(installed_version)" == "$version" ]]; then
  echo "setup_torch: torch $version already in $venv"
else
  if [[ ! -x "$python" ]]; then
    echo "setup_torch: creating $venv"
    /usr/bin/python3 -m venv "$venv"
  fi
  echo "setup_torch: installing torch==$version and numpy into $venv"
  "$python" -m pip install --quiet --disable-pip-version-check "torch==$version" numpy
  if [[ "$(installed_version)" != "$version" ]]; then
    echo "setup_torch: torch in $venv does not import as $version after installing; see the errors above" >&2
    exit 1
  fi
fi

"$python" - <<'EOF'
import torch

# A convolution forward and backward: the wheel trains on this CPU.
conv = torch.nn.Conv2d(3, 8, 3)
conv(torch.randn(2, 3, 16, 16)).sum().backward()
assert conv.weight.grad is not None

print(f"torch {torch.__version__}")
print(f"torch.backends.mkldnn.is_available(): {torch.backends.mkldnn.is_available()}")
print(f"torch.backends.mkl.is_available(): {torch.backends.mkl.is_available()}")
for line in torch.__config__.show().splitlines():
    line = line.strip()
    if line.startswith("- Build settings:"):
        settings = [item.strip() for item in line.split(":", 1)[1].split(",")]
        print("- Build settings: " + ", ".join(item for item in settings
                                              if item.startswith(("BLAS_INFO=", "USE_MKL", "USE_OPENMP="))))
    elif any(word in line for word in ("oneDNN", "MKL-DNN", "Math Kernel", "CPU capability")):
        print(line)
EOF
echo "setup_torch: peer interpreter: $python"
