#!/usr/bin/env bash
# Configures and builds lockstep into build/ (Release, at most 2 compile jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" > build.cmake.log 2>&1 || { cat build.cmake.log; exit 1; }
cmake --build build -j 2
