#!/usr/bin/env bash
# Builds ctnn and runs the whole test suite (the README's second command; CI runs it).
# GPU tests exit 77 when no CUDA device is present and CTest reports them as skipped.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CTNN_BUILD_DIR:-$root/build}
jobs=${CTNN_JOBS:-$(nproc)}

"$root/scripts/install_deps.sh"
"$root/scripts/fetch_mnist.sh" "$root/.data/mnist"   # the host learning test trains on MNIST
# Warnings (-Wall -Wextra for g++, clang and nvcc's host side) are errors: the code is warning-free.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_COMPILE_WARNING_AS_ERROR=ON
cmake --build "$build" -j "$jobs"
(cd "$build" && ctest --output-on-failure -j "$jobs" "$@")

# The host tests again, built by clang: clang++-19, or CTNN_CLANG_CXX (version 18 or later, for the
# layers' float template parameters). CUDA is off in that tree: nvcc's host compiler is g++. The
# compile-fail cases run there as a sample (all of them take minutes).
clang_cxx=${CTNN_CLANG_CXX:-clang++-19}
if command -v "$clang_cxx" >/dev/null; then
  clang_build=${CTNN_CLANG_BUILD_DIR:-$build-clang}
  cmake -S "$root" -B "$clang_build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clang_cxx" \
        -DCTNN_ENABLE_CUDA=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON
  cmake --build "$clang_build" -j "$jobs"
  (cd "$clang_build" && ctest --output-on-failure -j "$jobs" -LE '^compile_fail$' "$@")
else
  echo "test.sh: $clang_cxx not found, clang build skipped (scripts/install_deps.sh installs clang-19)"
fi

# A short fuzz pass: every file parser under ASan + UBSan on its seed corpus, a few seconds per
# target (CTNN_FUZZ_SECONDS). A long run: nice -n 19 scripts/fuzz.sh 3600 (see the README).
if command -v clang++ >/dev/null || command -v clang++-14 >/dev/null; then
  CTNN_FUZZ_BUILD="$build/fuzz" "$root/scripts/fuzz.sh" "${CTNN_FUZZ_SECONDS:-8}"
else
  echo "test.sh: clang++ not found, fuzz pass skipped (scripts/install_deps.sh installs it)"
fi
