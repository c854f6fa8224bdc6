#!/usr/bin/env bash
# Creates tests/.venv: the real readers of what lockstep writes for other tools, which the suite runs against
# its files (TensorBoard's event reader, onnxruntime for exported ONNX models), from PyPI, apart from Debian's
# Python. A second run with them present installs nothing. The tests that need them skip, saying so, where
# this has not run.
#
#   tests/setup_checkers.sh
set -euo pipefail
venv="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.venv"
requirements=(tensorboard==2.21.0 onnxruntime==1.23.2)
python="$venv/bin/python"
missing=("${requirements[@]}")
if [[ -x "$python" ]]; then
  installed=$("$python" -m pip freeze 2>/dev/null)
  missing=()
  for requirement in "${requirements[@]}"; do
    grep -qix -- "$requirement" <<< "$installed" || missing+=("$requirement")
  done
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup_checkers: $venv has ${requirements[*]}"
  exit 0
fi
[[ -x "$python" ]] || /usr/bin/python3 -m venv "$venv"
"$python" -m pip install -q --disable-pip-version-check "${missing[@]}"
echo "setup_checkers: installed ${missing[*]} into $venv"
