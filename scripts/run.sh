#!/usr/bin/env bash
# The README's first command: installs dependencies, fetches MNIST, builds (Release, in build/), then
#   with a CUDA device:  trains LeNet-5 on the GPU (lenet5 train) and evaluates the saved model (lenet5 eval);
#   without one:         trains LeNet-5 on a subset of MNIST with the host (CPU) backend (host_mnist).
# Usage: scripts/run.sh [lenet5 train options]     e.g. scripts/run.sh --epochs 5 --batch 128
# The model is saved to build/lenet5.safetensors unless --out says otherwise.
# CTNN_BUILD_DIR and CTNN_JOBS override the build directory and the number of build jobs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CTNN_BUILD_DIR:-$root/build}
jobs=${CTNN_JOBS:-$(nproc)}

# The options the evaluation must share with training; defaults unless given.
data=$root/.data/mnist
model=$build/lenet5.safetensors
extra=()
args=("$@")
value() { ((i + 1 < ${#args[@]})) || { echo "run.sh: error: ${args[i]} needs a value" >&2; exit 1; }; }
for ((i = 0; i < ${#args[@]}; ++i)); do
  case ${args[i]} in
    --data) value; data=${args[i + 1]}; ((++i)) ;;
    --data=*) data=${args[i]#--data=} ;;
    --out) value; model=${args[i + 1]}; ((++i)) ;;
    --out=*) model=${args[i]#--out=} ;;
    *) extra+=("${args[i]}") ;;
  esac
done

"$root/scripts/install_deps.sh"
"$root/scripts/fetch_mnist.sh" "$data"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release

# A GPU needs both a device and a CUDA compiler that CMake found.
gpu=yes why=""
if ! command -v nvidia-smi >/dev/null; then
  gpu=no why="nvidia-smi not found"
elif [[ $(nvidia-smi -L 2>/dev/null || true) != *GPU* ]]; then
  gpu=no why="nvidia-smi lists no GPU"
else
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  if [[ -z $nvcc || $nvcc == *NOTFOUND ]]; then
    gpu=no why="a GPU is present but CMake found no CUDA compiler (nvcc); install the CUDA toolkit"
  fi
fi

if [[ $gpu == yes ]]; then
  cmake --build "$build" -j "$jobs" --target lenet5
  lenet5=$build/examples/lenet5/lenet5
  rc=0
  "$lenet5" train --data "$data" --out "$model" ${extra[@]+"${extra[@]}"} || rc=$?
  if ((rc == 0)); then
    "$lenet5" eval --model "$model" --data "$data"
    echo "run.sh: done. Classify your own digit images with: $lenet5 predict --model $model IMAGE..."
    exit 0
  fi
  ((rc == 2)) || exit "$rc"  # 2: lenet5 found no usable CUDA device; anything else is a real failure
  why="lenet5 found no usable CUDA device"
fi

echo "run.sh: no CUDA device: running the host backend on a subset of MNIST instead ($why)"
((${#args[@]} == 0)) || echo "run.sh: (the arguments for lenet5 train are not used by host_mnist: ${args[*]})"
cmake --build "$build" -j "$jobs" --target host_mnist
"$build/examples/host_mnist/host_mnist" --data "$data"
