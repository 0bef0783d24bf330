#!/usr/bin/env bash
# Builds ctnn and runs the whole test suite (the README's second command; CI runs it).
# GPU tests exit 77 when no CUDA device is present and CTest reports them as skipped.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CTNN_BUILD_DIR:-$root/build}
jobs=${CTNN_JOBS:-$(nproc)}

"$root/scripts/install_deps.sh"
"$root/scripts/fetch_mnist.sh" "$root/.data/mnist"   # the host learning test trains on MNIST
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure -j "$jobs" "$@"

# A short fuzz pass: every file parser under ASan + UBSan on its seed corpus, a few seconds per
# target (CTNN_FUZZ_SECONDS). A long run: nice -n 19 scripts/fuzz.sh 3600 (see the README).
if command -v clang++ >/dev/null || command -v clang++-14 >/dev/null; then
  CTNN_FUZZ_BUILD="$build/fuzz" "$root/scripts/fuzz.sh" "${CTNN_FUZZ_SECONDS:-8}"
else
  echo "test.sh: clang++ not found, fuzz pass skipped (scripts/install_deps.sh installs it)"
fi
