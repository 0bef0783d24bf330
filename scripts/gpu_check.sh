#!/usr/bin/env bash
# Run on a machine with a CUDA GPU, from the repository root: builds the GPU tests, the lenet5
# example and the benchmark, then runs the stages named on the command line (default: all):
#   tests      every GPU test executable
#   sanitize   compute-sanitizer memcheck, racecheck, initcheck and synccheck over the GPU tests
#   sweep      lenet5 training for a grid of learning rates / epochs (three seeds each)
#   seeds      lenet5 training with the example's defaults for seeds 1, 2, 3, then eval and predict
#   bench      benchmarks/run_gpu.sh (ctnn against PyTorch)
# Logs go to $OUT (or ./gpu-out). MNIST is read from .data/mnist, or from .data/mnist-gz (gzip).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
stages=${*:-tests sanitize sweep seeds bench}
build=build-gpu
data=.data/mnist
if [ ! -f "$data/train-images-idx3-ubyte" ] && [ -d .data/mnist-gz ]; then
  mkdir -p "$data" && cp .data/mnist-gz/*.gz "$data/"   # the loaders read .gz too
fi
vendor=()
[ -d .vendor ] && vendor=(-DCTNN_VENDOR_DIR="$PWD/.vendor")
nvidia-smi -L | tee "$out/device.txt"
failed=0
step() { echo "=== $*"; "$@" || { echo "!!! failed: $*"; failed=1; }; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTNN_BUILD_TESTS=ON "${vendor[@]}" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
fi
targets=$(cmake --build "$build" --target help | awk '/gpu_test_/{print $2}' | tr '\n' ' ')
# shellcheck disable=SC2086
cmake --build "$build" -j16 --target $targets lenet5 >"$out/build-gpu.log" 2>&1 ||
  { grep -E "error|Error" "$out/build-gpu.log" | head -40; exit 1; }
echo "build warnings: $(grep -c "warning" "$out/build-gpu.log")"
gpu_tests=$(ls "$build"/tests/gpu/gpu_test_* 2>/dev/null | grep -v '\.' )

for stage in $stages; do
  case $stage in
    tests)
      for t in $gpu_tests; do step "$t" 2>&1 | tail -4 | tee -a "$out/tests.log"; done ;;
    sanitize)
      # SANITIZE_TESTS narrows the list (names without the gpu_test_ prefix); one log per tool.
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
        for t in $gpu_tests; do
          name=$(basename "$t"); name=${name#gpu_test_}
          [ -n "${SANITIZE_TESTS:-}" ] && [[ " $SANITIZE_TESTS " != *" $name "* ]] && continue
          # The one-epoch MNIST run is long under the sanitizer; CTNN_QUICK shortens it.
          CTNN_QUICK=1 compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" >"$out/sanitize.tmp" 2>&1 || failed=1
          cat "$out/sanitize.tmp" >>"$out/sanitize-$tool.log"
          echo "$tool $name: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize.tmp" | tail -1)"
        done
      done
      rm -f "$out/sanitize.tmp" ;;
    sweep)
      IFS='|' read -ra configs <<<"${SWEEP:-0.05 12 64|0.02 12 64}"   # "lr epochs batch [weight-decay]|..."
      for cfg in "${configs[@]}"; do
        read -r lr epochs batch wd <<<"$cfg"
        for seed in 1 2 3; do
          acc=$("$build/examples/lenet5/lenet5" train --data "$data" --lr "$lr" --epochs "$epochs" --batch "$batch" --weight-decay "${wd:-0}" \
                  --seed "$seed" --out "$out/sweep.safetensors" 2>/dev/null | grep -E '^epoch' | tail -1)
          echo "lr $lr epochs $epochs batch $batch wd ${wd:-0} seed $seed: $acc"
        done
      done | tee "$out/sweep.log" ;;
    seeds)
      for seed in 1 2 3; do
        step "$build/examples/lenet5/lenet5" train --data "$data" --seed "$seed" --out "/tmp/lenet5-seed$seed.safetensors" \
          2>/dev/null | tee "$out/train-seed$seed.log" | grep -vE '^\s*$'
      done
      step "$build/examples/lenet5/lenet5" eval --data "$data" --model /tmp/lenet5-seed1.safetensors
      [ -d tests/data/digits ] && step "$build/examples/lenet5/lenet5" predict --model /tmp/lenet5-seed1.safetensors tests/data/digits/* ;;
    bench)
      step bash benchmarks/run_gpu.sh --data "$data" --build-dir build-bench ;;
    *) echo "unknown stage $stage"; failed=1 ;;
  esac
done
exit $failed
