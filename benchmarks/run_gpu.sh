#!/usr/bin/env bash
# Builds and runs the LeNet-5 benchmarks on a GPU machine, from the repository root:
#   1. configures a fresh Release build in build-gpu (with -DCTNN_VENDOR_DIR=$PWD/.vendor when
#      .vendor/ exists: see scripts/vendor_deps.sh) and builds lenet5_bench (and, with --tests, all
#      of the tests, which it then runs with CTest);
#   2. runs benchmarks/lenet5_bench, then benchmarks/pytorch_lenet5.py, on the same data and batches;
#   3. prints the comparison from benchmarks/compare.py last.
# Every output is saved in $OUT when it is set, else in ./bench-out: env.txt, build.log, ctest.log
# (with --tests), ctnn.txt, pytorch.txt, compare.txt.
#
# Usage: benchmarks/run_gpu.sh [--quick] [--tests] [--no-examples] [--no-pytorch] [--keep-build]
#                              [--data DIR] [--batches LIST] [--epochs N] [--build-dir DIR] [-j N]
#   --quick        smoke run, passed to both benchmarks (1 timed epoch on 2,048 images, few repeats)
#   --tests        also build every test and run CTest (GPU tests included) before the benchmarks
#   --no-examples  configure without the examples (they may need CLI11/stb that the machine lacks)
#   --no-pytorch   run ctnn's benchmark alone
#   --keep-build   reuse the build directory instead of configuring it afresh
#   --data, --batches, --epochs   passed to both benchmarks (defaults: .data/mnist, 64,256,1024, 5)
# Exit status: 0 when every step succeeded, else 1 (the later steps still run where they can).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
out=${OUT:-$root/bench-out}
build=$root/build-gpu
data=.data/mnist
jobs=16
tests=OFF examples=ON pytorch=1 fresh=1
pass=()  # options for both benchmarks

die() { echo "run_gpu.sh: error: $*" >&2; exit 1; }
need_value() { (($# >= 2)) && [[ -n $2 ]] || die "$1 needs a value"; }
while (($#)); do
  case $1 in
    --quick) pass+=(--quick) ;;
    --tests) tests=ON ;;
    --no-examples) examples=OFF ;;
    --no-pytorch) pytorch=0 ;;
    --keep-build) fresh=0 ;;
    --data) need_value "$@"; data=$2; shift ;;
    --batches|--epochs) need_value "$@"; pass+=("$1" "$2"); shift ;;
    --build-dir) need_value "$@"; build=$(realpath -m "$2"); shift ;;
    -j) need_value "$@"; jobs=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
pass+=(--data "$data")
mkdir -p "$out" || die "cannot create $out"
rm -f "$out"/{env.txt,build.log,ctest.log,ctnn.txt,pytorch.txt,compare.txt}  # no stale results
failed=()

for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [[ -f $data/$f || -f $data/$f.gz ]] ||
    die "MNIST file $data/$f (or .gz) is missing; fetch it with scripts/fetch_mnist.sh on a machine with " \
        "network access and bring $data along"
done

section() { printf '\n===== %s =====\n' "$*"; }

section environment
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
       "$( [[ -n $(git -C "$root" status --porcelain 2>/dev/null) ]] && echo '(working tree modified)')"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || true
  nvcc --version 2>&1 | tail -n1 || true
  cmake --version | head -n1
  "${CXX:-c++}" --version 2>&1 | head -n1 || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 || true
} | tee "$out/env.txt"

vendor=()
if [[ -f $root/.vendor/include/boost/hana.hpp ]]; then
  vendor=(-DCTNN_VENDOR_DIR="$root/.vendor")
  echo "using the vendored dependencies in $root/.vendor"
fi
# nvcc from the usual place when it is not on PATH.
[[ -z ${CUDACXX:-} ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]] &&
  export CUDACXX=/usr/local/cuda/bin/nvcc

section "configure and build ($build)"
((fresh)) && rm -rf "$build"
targets=(--target lenet5_bench)
[[ $tests == ON ]] && targets=()
if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTNN_BUILD_TESTS=$tests \
      -DCTNN_BUILD_EXAMPLES=$examples -DCTNN_BUILD_BENCHMARKS=ON "${vendor[@]}" 2>&1 | tee "$out/build.log" &&
   cmake --build "$build" -j "$jobs" "${targets[@]}" 2>&1 | tee -a "$out/build.log"; then
  built=1
else
  built=0
  failed+=(build)
  echo "run_gpu.sh: the build failed (log: $out/build.log)." \
       "A missing Boost/Catch2/CLI11/zlib: run scripts/vendor_deps.sh where they are installed and bring .vendor/ along."
fi
bench=$build/benchmarks/lenet5_bench
if ((built)) && [[ ! -x $bench ]]; then
  built=0
  failed+=(build)
  echo "run_gpu.sh: $bench was not built: is CUDA found (CTNN_HAS_CUDA)? See $out/build.log"
fi

if ((built)) && [[ $tests == ON ]]; then
  section "tests (ctest)"
  (cd "$build" && ctest --output-on-failure -j 8) 2>&1 | tee "$out/ctest.log" || failed+=(tests)
fi

if ((built)); then
  section "ctnn: $bench ${pass[*]}"
  "$bench" "${pass[@]}" 2>&1 | tee "$out/ctnn.txt" || failed+=(ctnn)
fi

if ((pytorch)); then
  section "PyTorch: benchmarks/pytorch_lenet5.py ${pass[*]}"
  PYTHONUNBUFFERED=1 python3 "$root/benchmarks/pytorch_lenet5.py" "${pass[@]}" 2>&1 | tee "$out/pytorch.txt" ||
    failed+=(pytorch)
fi

section comparison
inputs=()
for f in "$out/ctnn.txt" "$out/pytorch.txt"; do [[ -s $f ]] && inputs+=("$f"); done
if ((${#inputs[@]})); then
  python3 "$root/benchmarks/compare.py" "${inputs[@]}" 2>&1 | tee "$out/compare.txt" || failed+=(compare)
else
  echo "nothing to compare"
fi

echo
if ((${#failed[@]})); then
  echo "run_gpu.sh: FAILED steps: ${failed[*]} (outputs in $out)"
  exit 1
fi
echo "run_gpu.sh: all steps succeeded (outputs in $out)"
