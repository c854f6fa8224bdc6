#!/usr/bin/env bash
# Installs oneDNN 3.2 into third_party/onednn (the library, its headers and its CMake package), from PyPI's
# onednn-cpu-gomp and onednn-devel-cpu-gomp wheels: the build with GNU OpenMP, the runtime the rest of the
# process uses (the newer `onednn` wheels link Intel's TBB and SYCL runtimes). Debian 12 has oneDNN 2.6 only,
# whose AMX backward convolutions for bfloat16 are up to 2x slower. CMake finds the prefix by itself
# (LOCKSTEP_ONEDNN_PREFIX). A second run with it present installs nothing.
#
#   scripts/setup_onednn.sh
set -euo pipefail
prefix="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/onednn"
version=2023.2.0  # the wheels' version; oneDNN 3.2.0
stamp="$prefix/wheels-version"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "setup_onednn: $prefix has oneDNN from the $version wheels"
  exit 0
fi
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
/usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$download" \
  "onednn-cpu-gomp==$version" "onednn-devel-cpu-gomp==$version"
rm -rf "$prefix"
mkdir -p "$prefix"
# A wheel's files for the prefix are under <name>.data/data/. The wheel holds libdnnl.so, .so.3 and .so.3.2 as
# three copies; the first two become the usual links.
/usr/bin/python3 - "$download" "$prefix" <<'PY'
import glob, os, sys, zipfile
download, prefix = sys.argv[1:]
for wheel in glob.glob(os.path.join(download, "*.whl")):
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.infolist():
            parts = entry.filename.split("/", 2)
            if len(parts) < 3 or not parts[0].endswith(".data") or parts[1] != "data" or entry.is_dir():
                continue
            target = os.path.join(prefix, parts[2])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(entry) as source, open(target, "wb") as out:
                out.write(source.read())
            os.chmod(target, 0o755 if ".so" in target else 0o644)
PY
(cd "$prefix/lib" && real=$(ls libdnnl.so.3.* | head -1) && ln -sf "$real" libdnnl.so.3 && ln -sf libdnnl.so.3 libdnnl.so)
echo "$version" > "$stamp"
echo "setup_onednn: installed oneDNN ($version wheels) into $prefix"
