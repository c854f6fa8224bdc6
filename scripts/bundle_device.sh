#!/usr/bin/env bash
# Packs the built programs and the non-CUDA shared libraries they load into one folder that runs on a GPU
# machine, whose CUDA toolkit, cuDNN and NCCL the programs use; see --help and bench/notes/gpu.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/bundle_device.sh [--build DIR] [--out DIR] [--no-dataset] [-h]

Bundles the programs of a build folder so that they run on the GPU machine (a separate machine). The
folder it writes holds:
  lockstep, resnet50_trainer, lockstep_tests (if built) and the bench programs that were built: wrapper
      scripts that unpack the programs once per machine and run them with the bundle's libraries
  payload.tar.gz   the programs and the shared libraries they need (liblockstep.so, oneDNN, protobuf, Gloo,
                   ...), gzipped to stay within the transfer limit; wrappers unpack it into
                   $LOCKSTEP_BUNDLE_CACHE (default ${TMPDIR:-/tmp}/lockstep-bundle)
  env.sh           what the wrappers source: sets LD_LIBRARY_PATH, LOCKSTEP_BUNDLE_BIN (the unpacked programs,
                   for debuggers), LOCKSTEP_SOURCE_DIR, LOCKSTEP_CLI_PATH and LOCKSTEP_FASHION_MNIST_DIR
  cuda_libs.txt    the CUDA toolkit, cuDNN and NCCL libraries the programs need; env.sh finds them on the GPU
                   machine (ldconfig, LD_LIBRARY_PATH, $LOCKSTEP_CUDA_LIB_PATH, /usr/local/cuda, then the
                   nvidia/*/lib folders of python3's PyTorch wheels) and stops with their names if one is missing
  source/          the files the tests read from the source tree (tests/*.py)
  fashion-mnist/   the Fashion-MNIST idx files, from $LOCKSTEP_FASHION_MNIST_DIR or
                   /usr/share/datasets/fashion-mnist, when they exist here
  manifest.txt     what was bundled, and from where
Libraries of the C runtime (glibc, libstdc++, libgcc_s) stay out: every Linux machine has them, and the GPU
machine's CUDA libraries need its own.

The bundle and the rest of the working tree must stay within the runner's transfer limit (64 MiB); the
script prints the size and fails, leaving an older bundle in place, when they do not.

  --build DIR    build folder (default: build/ in the repository); it is not rebuilt
  --out DIR      output folder (default: bundle/ in the repository); replaced if it holds an older bundle
  --no-dataset   leave Fashion-MNIST out (about 30 MiB less to transfer)
  -h, --help     this text

On the GPU machine: bundle/lockstep train ..., bundle/lockstep_tests --gtest_filter=..., or
bash bench/gpu_resnet50.sh; see bench/notes/gpu.md.
EOF
}

# The runner that copies the tree to the GPU machine sends at most this much: tracked and untracked-not-ignored files plus carried paths.
readonly kTransferLimitBytes=$((64 * 1024 * 1024))
# glibc, libstdc++ and libgcc_s: on every machine, and a copy older than the GPU machine's own would break the
# CUDA libraries loaded beside it.
system_libraries=(linux-vdso ld-linux-x86-64 libc libm libdl libpthread librt libresolv libutil libanl libmvec
  'libstdc\+\+' libgcc_s)
# The CUDA toolkit, driver, cuDNN and NCCL: the GPU machine has its own, matched to its driver.
cuda_libraries=(libcuda libcudart libcublas libcublasLt libcurand libcufft libcufftw libcusparse libcusolver libcupti
  libnvrtc libnvrtc-builtins libnvJitLink libnvToolsExt 'libnvidia-.*' 'libcudnn.*' libnccl)
system_pattern="^($(IFS='|' && echo "${system_libraries[*]}"))\.so"
cuda_pattern="^($(IFS='|' && echo "${cuda_libraries[*]}"))\.so"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
out=$repo/bundle
with_dataset=1

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --no-dataset) with_dataset=0; shift ;;
    --build | --out)
      if (($# < 2)); then
        echo "error: $1 needs a folder; see --help" >&2
        exit 2
      fi
      if [[ $1 == --build ]]; then build=$2; else out=$2; fi
      shift 2
      ;;
    *) echo "error: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done

if [[ ! -d $build ]]; then
  echo "error: build folder $build not found: run scripts/build.sh first (or pass --build DIR)" >&2
  exit 2
fi
build=$(cd "$build" && pwd)
for required in lockstep resnet50_trainer liblockstep.so; do
  if [[ ! -f $build/$required ]]; then
    echo "error: $build/$required not found: run scripts/build.sh first (or pass --build DIR)" >&2
    exit 2
  fi
done
for tool in ldd tar gzip sha256sum; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 2; }
done

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
if [[ -e $out && ! -f $out/payload.id ]] && [[ ! -d $out || -n $(ls -A "$out") ]]; then
  echo "error: $out exists and is not a bundle; remove it or pass another --out" >&2
  exit 2
fi

# Built in a sibling folder and renamed at the end, so a failure leaves the previous bundle as it was.
staging=$(mktemp -d "$(dirname "$out")/.bundle_device.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/payload/bin" "$staging/payload/lib"

programs=(lockstep resnet50_trainer)
skipped=()
optional=(lockstep_tests)
for source in "$repo"/bench/*.cc; do
  if [[ -f $source ]]; then optional+=("$(basename "$source" .cc)"); fi
done
for name in "${optional[@]}"; do
  if [[ -f $build/$name ]]; then programs+=("$name"); else skipped+=("$name (not built)"); fi
done

{
  echo "lockstep device bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) from $build"
  echo "commit: $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
  echo
  echo "programs (payload.tar.gz bin/, each run by the wrapper of its name):"
} >"$staging/manifest.txt"
for name in "${programs[@]}"; do
  cp "$build/$name" "$staging/payload/bin/$name"
  echo "  $name" >>"$staging/manifest.txt"
done
cp -L "$build/liblockstep.so" "$staging/payload/lib/liblockstep.so"

# Every library the programs and liblockstep.so load, by soname, with the file it resolves to here.
declare -A resolved=()
for elf in "${programs[@]/#/$build/}" "$build/liblockstep.so"; do
  while read -r soname path; do
    if [[ $path == not ]]; then
      echo "error: $elf needs $soname, which ldd does not find on this machine: install it or rebuild" >&2
      exit 1
    fi
    resolved[$soname]=$path
  done < <(ldd "$elf" | awk '$2 == "=>" { print $1, $3 }')
done

bundled_libraries=0
echo "libraries (payload.tar.gz lib/):" >>"$staging/manifest.txt"
echo "  liblockstep.so <= $build/liblockstep.so" >>"$staging/manifest.txt"
needed_from_gpu_machine=()
for soname in $(printf '%s\n' "${!resolved[@]}" | sort); do
  path=${resolved[$soname]}
  if [[ $soname == liblockstep.so || $soname =~ $system_pattern ]]; then
    continue
  elif [[ $soname =~ $cuda_pattern || $path == /usr/local/cuda* || $path == /usr/local/nvidia* ]]; then
    needed_from_gpu_machine+=("$soname")
    continue
  fi
  cp -L "$path" "$staging/payload/lib/$soname"
  echo "  $soname <= $path" >>"$staging/manifest.txt"
  bundled_libraries=$((bundled_libraries + 1))
done
printf '%s\n' "${needed_from_gpu_machine[@]}" >"$staging/cuda_libs.txt"
{
  echo "from the GPU machine (cuda_libs.txt; found by env.sh):"
  for soname in "${needed_from_gpu_machine[@]}"; do echo "  $soname (here: ${resolved[$soname]})"; done
} >>"$staging/manifest.txt"

tar -czf "$staging/payload.tar.gz" -C "$staging/payload" bin lib
rm -rf "$staging/payload"
sha256sum "$staging/payload.tar.gz" | cut -c1-16 >"$staging/payload.id"

# Tests read these through LOCKSTEP_SOURCE_DIR: the scripts and data under tests/, not the C++ sources, nor what
# git ignores there (the checkers' virtual environment).
echo "source files (source/):" >>"$staging/manifest.txt"
while IFS= read -r -d '' file; do
  [[ $file == *.cc || $file == *.h || ! -f $repo/$file ]] && continue
  mkdir -p "$staging/source/$(dirname "$file")"
  cp "$repo/$file" "$staging/source/$file"
  echo "  $file" >>"$staging/manifest.txt"
done < <(cd "$repo" && git ls-files -z -c -o --exclude-standard -- tests | sort -z)

dataset_note="Fashion-MNIST left out (--no-dataset)"
if ((with_dataset)); then
  dataset_dir=${LOCKSTEP_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
  copied=()
  for file in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
    t10k-labels-idx1-ubyte.gz; do
    if [[ -f $dataset_dir/$file ]]; then
      mkdir -p "$staging/fashion-mnist"
      cp "$dataset_dir/$file" "$staging/fashion-mnist/$file"
      copied+=("$file")
    fi
  done
  if ((${#copied[@]} == 4)); then
    dataset_note="Fashion-MNIST from $dataset_dir"
  elif ((${#copied[@]} > 0)); then
    dataset_note="Fashion-MNIST incomplete in $dataset_dir: only ${copied[*]}"
  else
    dataset_note="Fashion-MNIST not found in $dataset_dir: not bundled"
  fi
fi
echo "dataset: $dataset_note" >>"$staging/manifest.txt"

cat >"$staging/env.sh" <<'EOF'
# Sourced by the wrappers beside it, or by hand (`. bundle/env.sh`, then run $LOCKSTEP_BUNDLE_BIN/<program> under
# a debugger): unpacks the bundle's programs and libraries once per machine, finds the machine's CUDA libraries,
# and exports LD_LIBRARY_PATH, LOCKSTEP_BUNDLE_BIN and the paths the tests read. Written by
# scripts/bundle_device.sh.

# Prints, colon-separated, the folders holding the libraries of cuda_libs.txt that the loader would not find by
# itself; fails naming those found nowhere.
lockstep_bundle_cuda_path() {  # bundle folder
  local known lib dir found path='' missing='' searched_python=''
  local -a dirs python_dirs=()
  known=$(ldconfig -p 2>/dev/null)
  IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}:${LOCKSTEP_CUDA_LIB_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64"
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
  while read -r lib; do
    [[ -n $lib && $known != *$'\t'"$lib "* ]] || continue
    found=
    for dir in "${dirs[@]}"; do
      if [[ -n $dir && -e $dir/$lib ]]; then found=$dir; break; fi
    done
    if [[ -z $found && -z $searched_python ]]; then
      # PyTorch's CUDA wheels put cuDNN, NCCL and the toolkit's libraries in site-packages/nvidia/*/lib.
      searched_python=1
      mapfile -t python_dirs < <(python3 -c 'import glob, os, nvidia
for p in nvidia.__path__: print("\n".join(sorted(glob.glob(os.path.join(p, "*", "lib")))))' 2>/dev/null)
    fi
    if [[ -z $found ]]; then
      for dir in "${python_dirs[@]}"; do
        if [[ -e $dir/$lib ]]; then found=$dir; break; fi
      done
    fi
    if [[ -z $found ]]; then
      missing+=" $lib"
    elif [[ ":${LD_LIBRARY_PATH:-}:$path:" != *":$found:"* ]]; then
      path=${path:+$path:}$found
    fi
  done <"$1/cuda_libs.txt"
  if [[ -n $missing ]]; then
    echo "error: this machine lacks$missing (searched ldconfig, LD_LIBRARY_PATH, /usr/local/cuda and python3's" \
      "nvidia packages): set LOCKSTEP_CUDA_LIB_PATH to the folders that hold them" >&2
    return 1
  fi
  echo "$path"
}

lockstep_bundle_env() {
  local bundle cache partial cuda_path
  bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || return 1
  cache=${LOCKSTEP_BUNDLE_CACHE:-${TMPDIR:-/tmp}/lockstep-bundle}/$(<"$bundle/payload.id") || return 1
  if [[ ! -d $cache/bin ]]; then
    mkdir -p "${cache%/*}" && partial=$(mktemp -d "$cache.XXXXXX") || return 1
    if ! tar -xzf "$bundle/payload.tar.gz" -C "$partial"; then
      rm -rf "$partial"
      echo "error: cannot unpack $bundle/payload.tar.gz into $partial" >&2
      return 1
    fi
    chmod 755 "$partial"
    # Another process may have unpacked the same payload meanwhile: either copy will do.
    mv -T "$partial" "$cache" 2>/dev/null || rm -rf "$partial"
    [[ -d $cache/bin ]] || { echo "error: cannot unpack the bundle into $cache" >&2; return 1; }
  fi
  # A bundled program that starts another (the tests start lockstep) passes on an environment already set.
  [[ ${LOCKSTEP_BUNDLE_BIN:-} == "$cache/bin" ]] && return 0
  cuda_path=$(lockstep_bundle_cuda_path "$bundle") || return 1
  export LOCKSTEP_BUNDLE_BIN=$cache/bin
  export LD_LIBRARY_PATH=$cache/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}${cuda_path:+:$cuda_path}
  export LOCKSTEP_SOURCE_DIR=${LOCKSTEP_SOURCE_DIR:-$bundle/source}
  export LOCKSTEP_CLI_PATH=${LOCKSTEP_CLI_PATH:-$bundle/lockstep}
  if [[ -z ${LOCKSTEP_FASHION_MNIST_DIR:-} && -d $bundle/fashion-mnist ]]; then
    export LOCKSTEP_FASHION_MNIST_DIR=$bundle/fashion-mnist
  fi
}

lockstep_bundle_env
EOF

for name in "${programs[@]}"; do
  cat >"$staging/$name" <<'EOF'
#!/usr/bin/env bash
# Runs the bundled program of this name with the bundle's libraries (written by scripts/bundle_device.sh).
. "$(dirname "${BASH_SOURCE[0]}")/env.sh" || exit 1
exec "$LOCKSTEP_BUNDLE_BIN/$(basename "${BASH_SOURCE[0]}")" "$@"
EOF
  chmod 755 "$staging/$name"
done

# What that runner would send with the bundle: the rest of the working tree (the bundle, old and new, left
# out whether git ignores it or not).
tree_bytes=0
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  pathspec=(.)
  for folder in "$out" "$staging"; do
    if [[ $folder == "$repo"/* ]]; then pathspec+=(":(exclude)${folder#"$repo"/}"); fi
  done
  # du complains of tracked files deleted in the working tree, and still prints the total of the others.
  tree_bytes=$(cd "$repo" && git ls-files -z -c -o --exclude-standard -- "${pathspec[@]}" |
    { du -cb --files0-from=- 2>/dev/null || true; } | awk 'END { print $1 + 0 }')
fi
bundle_bytes=$(du -sb "$staging" | awk '{ print $1 }')
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

if ((bundle_bytes + tree_bytes > kTransferLimitBytes)); then
  echo "error: the bundle ($(mib "$bundle_bytes")) and the rest of the working tree ($(mib "$tree_bytes"))" \
    "come to $(mib $((bundle_bytes + tree_bytes))), over the runner's $(mib $kTransferLimitBytes)" \
    "transfer limit; $out is left as it was. Leave out Fashion-MNIST (--no-dataset) or make the build smaller." >&2
  exit 1
fi

rm -rf "$out"
mv -T "$staging" "$out"
chmod 755 "$out"
trap - EXIT

for entry in "${skipped[@]}"; do echo "skipped $entry"; done
echo "$dataset_note"
echo "needs from the GPU machine: ${needed_from_gpu_machine[*]:-nothing}"
echo "bundled ${#programs[@]} programs (${programs[*]}) and $((bundled_libraries + 1)) libraries into $out"
echo "bundle size: $(mib "$bundle_bytes") (payload.tar.gz $(mib "$(stat -c %s "$out/payload.tar.gz")"));" \
  "with the rest of the working tree $(mib $((bundle_bytes + tree_bytes))) of the runner's" \
  "$(mib $kTransferLimitBytes)"
