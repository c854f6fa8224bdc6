#!/bin/bash
# The installed library, used as a user would use it. `prefix`: `cmake --install` of the runtime,
# development and (where built) python components into a temporary prefix; `deb`: the .deb that cpack makes,
# unpacked with dpkg-deb. Then, against that tree alone: its headers include only installed or dependency
# headers, the installed `lockstep --version` matches the build's, the Python package imports and `lockstep
# plot` finds it, examples/consumer configures (find_package), builds without a path into the source or build
# tree and trains an epoch of a Fashion-MNIST subset, and a program builds with pkg-config's flags. Exit status 77 means skipped (a tool or the data is missing).
#
#   tests/install_test.sh prefix|deb SOURCE_DIR BUILD_DIR CMAKE CPACK CXX
set -eu
mode=$1 src=$2 build=$3 cmake=$4 cpack=$5 cxx=$6

skip() {
  echo "skipped: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

fashion=${LOCKSTEP_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$fashion/train-images-idx3-ubyte.gz" ] || skip "no Fashion-MNIST in $fashion (dataset-fashion-mnist)"
command -v "$cxx" > /dev/null || skip "no compiler $cxx"
version_line=$("$build/lockstep" --version | head -n 1)  # "lockstep 0.1.0 (git 0123456789ab)"
version=$(echo "$version_line" | cut -d ' ' -f 2)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $mode in
prefix)
  prefix=$tmp/prefix
  components=(runtime development)
  [ -d "$build/python/lockstep" ] && components+=(python)
  for component in "${components[@]}"; do
    "$cmake" --install "$build" --prefix "$prefix" --component "$component" > "$tmp/install.log" ||
      fail "cmake --install --component $component: $(cat "$tmp/install.log")"
  done
  ;;
deb)
  [ -x "$cpack" ] || skip "no cpack"
  command -v dpkg-deb > /dev/null || skip "no dpkg-deb"
  # The package holds what `cmake --install` of every component puts under CPACK_PACKAGING_INSTALL_PREFIX.
  # cpack would build the project first (its preinstall step), which relinks the library whenever the git
  # commit changed since the build, under the tests running beside this one; so it packages that install.
  packaging_prefix=$(sed -nE 's/^set\(CPACK_PACKAGING_INSTALL_PREFIX "(.*)"\)$/\1/p' "$build/CPackConfig.cmake")
  DESTDIR=$tmp/stage "$cmake" --install "$build" --prefix "$packaging_prefix" > "$tmp/install.log" ||
    fail "cmake --install: $(cat "$tmp/install.log")"
  "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/package" -D CPACK_INSTALL_CMAKE_PROJECTS= \
    -D "CPACK_INSTALLED_DIRECTORIES=$tmp/stage;." > "$tmp/cpack.log" 2>&1 || fail "cpack -G DEB: $(cat "$tmp/cpack.log")"
  debs=("$tmp"/package/*.deb)
  [ ${#debs[@]} -eq 1 ] || fail "cpack made ${#debs[@]} packages: ${debs[*]}"
  deb=${debs[0]}
  name=$(dpkg-deb -f "$deb" Package)
  [ "$(basename "$deb")" = "${name}_${version}_$(dpkg-deb -f "$deb" Architecture).deb" ] ||
    fail "package file $(basename "$deb") for package $name $version"
  [ "$name" = lockstep ] || [ "$name" = lockstep-cuda ] || fail "package name $name"
  [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "package version $(dpkg-deb -f "$deb" Version), not $version"
  depends=$(dpkg-deb -f "$deb" Depends)
  for package in libgomp1 libprotobuf32 libfmt9 libgloo0; do
    [[ "$depends" == *"$package"* ]] || fail "Depends has no $package: $depends"
  done
  dpkg-deb -x "$deb" "$tmp/root"
  prefix=$tmp/root/usr
  [ -x "$prefix/bin/lockstep" ] || fail "the package has no /usr/bin/lockstep: $(dpkg-deb -c "$deb")"
  ;;
*) fail "mode $mode: prefix or deb" ;;
esac
echo "installed into $prefix"

# Installed headers include installed headers, the standard library, protobuf and fmt, nothing else.
cd "$prefix/include"
mapfile -t headers < <(find . -name '*.h')
for header in "${headers[@]}"; do
  # shellcheck disable=SC2013 # an include names a path without spaces
  for include in $(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$header"); do
    [ -f "$include" ] || [ -f "$(dirname "$header")/$include" ] || fail "$header includes \"$include\", not installed"
  done
  # shellcheck disable=SC2013
  for include in $(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*/\1/p' "$header"); do
    [[ "$include" != *.* || "$include" == google/protobuf/* || "$include" == fmt/* ]] ||
      fail "$header includes <$include>, a header of a dependency the installed library does not declare"
  done
done
cd "$tmp"

# The installed library brings its own oneDNN and finds it there, not in the source tree's third_party/.
dnnl=$(find "$prefix" -path '*/lockstep/libdnnl.so.3' | head -n 1)
[ -n "$dnnl" ] || fail "no lockstep/libdnnl.so.3 under $prefix"
if command -v readelf > /dev/null; then
  runpath=$(readelf -d "$(dirname "$(dirname "$dnnl")")"/liblockstep.so.* | grep -E 'RUNPATH|RPATH' || true)
  [[ "$runpath" != *"$src"* && "$runpath" != *"$build"* ]] || fail "the installed library's runpath: $runpath"
fi

# The installed programs find the installed library (RPATH), not the build's.
installed_line=$(env -u LD_LIBRARY_PATH "$prefix/bin/lockstep" --version | head -n 1)
[ "$installed_line" = "$version_line" ] || fail "installed lockstep --version: '$installed_line', build: '$version_line'"
env -u LD_LIBRARY_PATH "$prefix/bin/resnet50_trainer" --help > /dev/null || fail "installed resnet50_trainer --help"

# The Python package (where the build has it): it loads the installed library, and the installed
# `lockstep plot` finds it beside itself.
python_dir=$prefix/lib/python3/dist-packages
if [ -d "$build/python/lockstep" ]; then
  extensions=("$python_dir"/lockstep/_lockstep*.so)
  [ -f "${extensions[0]}" ] || fail "no Python package in $python_dir"
  imported=$(cd "$tmp" && env -u LD_LIBRARY_PATH PYTHONPATH="$python_dir" /usr/bin/python3 -c \
    'import lockstep, lockstep.workspace as w, lockstep._core as c; print(w.__file__, lockstep.__version__, c.C.version_line())') ||
    fail "import lockstep from $python_dir"
  [ "$imported" = "$python_dir/lockstep/workspace.py $version $version_line" ] || fail "imported: $imported"
  # caffe2 beside it: Caffe2's modules over the installed lockstep.
  imported=$(cd "$tmp" && env -u LD_LIBRARY_PATH PYTHONPATH="$python_dir" /usr/bin/python3 -c \
    'from caffe2.python import core, workspace, data_parallel_model; from caffe2.proto import caffe2_pb2; import caffe2.python.models.resnet, caffe2.python.predictor.predictor_exporter; print(workspace.__file__, caffe2_pb2.CPU)') ||
    fail "import caffe2 from $python_dir"
  [ "$imported" = "$python_dir/caffe2/python/workspace.py 0" ] || fail "imported caffe2: $imported"
  printf '%s\n%s\n' "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy" \
    "1,1,100,100,10,100,0.5,1,0.1,1.5,0.4" > "$tmp/run.log"
  env -u LD_LIBRARY_PATH -u LOCKSTEP_PYTHON_DIR "$prefix/bin/lockstep" plot "$tmp/run.log" -o "$tmp/curves.png" \
    > "$tmp/plot.log" 2>&1 || fail "installed lockstep plot: $(cat "$tmp/plot.log")"
  [ -s "$tmp/curves.png" ] || fail "installed lockstep plot wrote no PNG"
fi

# examples/consumer: find_package(lockstep) from the installed tree.
config=$(find "$prefix" -name lockstepConfig.cmake)
[ -n "$config" ] || fail "no lockstepConfig.cmake under $prefix"
"$cmake" -S "$src/examples/consumer" -B consumer -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -Dlockstep_DIR="$(dirname "$config")" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  > configure.log 2>&1 || fail "configuring examples/consumer: $(cat configure.log)"
grep -q "lockstep $version from $(dirname "$config")" configure.log || fail "find_package: $(cat configure.log)"
"$cmake" --build consumer > build.log 2>&1 || fail "building examples/consumer: $(cat build.log)"

# Nothing but the example's own source file comes from the source or build tree.
commands=$(cat consumer/compile_commands.json consumer/CMakeFiles/data_parallel_convnet.dir/flags.make \
  consumer/CMakeFiles/data_parallel_convnet.dir/link.txt)
commands=${commands//"$src/examples/data_parallel_convnet.cc"/}
[[ "$commands" != *"$src"* ]] || fail "the consumer's build names the source tree $src: $commands"
[[ "$commands" != *"$build"* ]] || fail "the consumer's build names the build tree $build: $commands"
[[ "$commands" == *"$prefix/include"* ]] || fail "the consumer's build does not include $prefix/include: $commands"
if command -v readelf > /dev/null; then
  runpath=$(readelf -d consumer/data_parallel_convnet | grep -E 'RUNPATH|RPATH' || true)
  [[ "$runpath" != *"$build"* ]] || fail "the consumer's runpath names the build tree: $runpath"
fi

# One epoch on 2560 training and 1000 test images: idx files with the counts changed, read as plain files.
mkdir fashion
subset() {  # subset NAME HEADER ITEM_BYTES COUNT
  printf '%b' "$2" > "fashion/$1"
  { gzip -dc "$fashion/$1" || true; } | tail -c +$((${#2} / 4 + 1)) | head -c $(($3 * $4)) >> "fashion/$1"
}
subset train-images-idx3-ubyte.gz '\x00\x00\x08\x03\x00\x00\x0a\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' 784 2560
subset train-labels-idx1-ubyte.gz '\x00\x00\x08\x01\x00\x00\x0a\x00' 1 2560
subset t10k-images-idx3-ubyte.gz '\x00\x00\x08\x03\x00\x00\x03\xe8\x00\x00\x00\x1c\x00\x00\x00\x1c' 784 1000
subset t10k-labels-idx1-ubyte.gz '\x00\x00\x08\x01\x00\x00\x03\xe8' 1 1000
env -u LD_LIBRARY_PATH LOCKSTEP_FASHION_MNIST_DIR="$tmp/fashion" consumer/data_parallel_convnet 2 1 > run.log 2>&1 ||
  fail "examples/consumer's data_parallel_convnet 2 1: $(cat run.log)"
cat run.log
grep -qE '^epoch 1: test accuracy 0\.[0-9]+$' run.log || fail "no test accuracy line"

# pkg-config: the flags of lockstep.pc build a program against the installed tree.
if command -v pkg-config > /dev/null; then
  PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name lockstep.pc)")
  export PKG_CONFIG_PATH
  [ "$(pkg-config --modversion lockstep)" = "$version" ] || fail "pkg-config --modversion lockstep"
  cat > version.cc << 'EOF'
#include <cstdio>
#include "lockstep/core/enforce.h"
#include "lockstep/core/version.h"
#include "lockstep.pb.h"
int main() {
  lockstep::NetDef net;
  LOCKSTEP_ENFORCE(net.op_size() == 0, "an empty net has no operators");
  std::puts(lockstep::Version());
}
EOF
  read -ra flags <<< "$(pkg-config --cflags --libs lockstep)"
  # No -Wl,-rpath of our own: the .pc's flags carry it, so the program runs without LD_LIBRARY_PATH.
  "$cxx" -std=c++17 version.cc -o version "${flags[@]}" ||
    fail "building with pkg-config's flags: ${flags[*]}"
  [ "$(env -u LD_LIBRARY_PATH ./version)" = "$version" ] || fail "the pkg-config program printed $(./version)"
fi
echo "installed tree ($mode) OK: $version_line"
