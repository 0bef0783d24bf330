#!/usr/bin/env bash
# The README's first command: installs dependencies, fetches MNIST, builds (Release, in build/), then
# trains LeNet-5 with the lenet5 binary, saves it to build/lenet5.safetensors, evaluates it (test
# accuracy and confusion matrix) and writes the report PNGs and the metrics CSV to build/report/:
#   with a CUDA device:  on the GPU, the full training set, lenet5 train's defaults (10 epochs);
#   without one:         on the CPU (every core), the first 20,000 training images, 3 epochs, so
#                        that it ends within a few minutes on 2 cores.
# Usage: scripts/run.sh [lenet5 train options]     e.g. scripts/run.sh --epochs 5 --batch 128
#        --data DIR (MNIST or Fashion-MNIST) and --out FILE are used by both train and eval; on the
#        CPU, options given replace the CPU defaults of the same name.
# Without a CUDA compiler lenet5 cannot be built: host_mnist (the API example) trains on the CPU.
# CTNN_BUILD_DIR and CTNN_JOBS override the build directory and the number of build jobs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CTNN_BUILD_DIR:-$root/build}
jobs=${CTNN_JOBS:-$(nproc)}

# The options the evaluation shares with training; defaults unless given.
data=$root/.data/mnist
model=$build/lenet5.safetensors
extra=()
given=" "
args=("$@")
value() { ((i + 1 < ${#args[@]})) || { echo "run.sh: error: ${args[i]} needs a value" >&2; exit 2; }; }
for ((i = 0; i < ${#args[@]}; ++i)); do
  case ${args[i]} in
    --data) value; data=${args[i + 1]}; ((++i)) ;;
    --data=*) data=${args[i]#--data=} ;;
    --out) value; model=${args[i + 1]}; ((++i)) ;;
    --out=*) model=${args[i]#--out=} ;;
    *) extra+=("${args[i]}"); [[ ${args[i]} == --* ]] && given+="${args[i]%%=*} " ;;
  esac
done

"$root/scripts/install_deps.sh"
if [[ $data == "$root/.data/mnist" ]]; then "$root/scripts/fetch_mnist.sh" "$data"; fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release

nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
if [[ -z $nvcc || $nvcc == *NOTFOUND ]]; then
  echo "run.sh: CMake found no CUDA compiler (nvcc), so lenet5 is not built; training on the CPU with host_mnist"
  ((${#args[@]} == 0)) || echo "run.sh: (host_mnist takes no training options; ignored: ${extra[*]-})"
  cmake --build "$build" -j "$jobs" --target host_mnist
  exec "$build/examples/host_mnist/host_mnist" "$data" "$model"
fi

cmake --build "$build" -j "$jobs" --target lenet5
lenet5=$build/examples/lenet5/lenet5
report=$build/report

gpu=yes why=""
if ! command -v nvidia-smi >/dev/null; then
  gpu=no why="nvidia-smi not found"
elif [[ $(nvidia-smi -L 2>/dev/null || true) != *GPU* ]]; then
  gpu=no why="nvidia-smi lists no GPU"
fi

rc=0
if [[ $gpu == yes ]]; then
  "$lenet5" train --device cuda --data "$data" --out "$model" --metrics "$build/metrics.csv" --report "$report" \
    ${extra[@]+"${extra[@]}"} || rc=$?
  ((rc == 0 || rc == 4)) || exit "$rc"  # 4: lenet5 found no usable CUDA device
  if ((rc == 4)); then gpu=no why="lenet5 found no usable CUDA device"; fi
fi
if [[ $gpu == no ]]; then
  echo "run.sh: no CUDA device ($why): training on the CPU, on a subset of the training set"
  # CPU defaults, each unless given on the command line.
  cpu=()
  [[ $given == *" --limit "* ]] || cpu+=(--limit 20000)
  [[ $given == *" --epochs "* ]] || cpu+=(--epochs 3)
  [[ $given == *" --batch "* ]] || cpu+=(--batch 32)
  "$lenet5" train --device cpu --data "$data" --out "$model" --metrics "$build/metrics.csv" --report "$report" \
    "${cpu[@]}" ${extra[@]+"${extra[@]}"}
  device=cpu
else
  device=cuda
fi
"$lenet5" eval --device "$device" --model "$model" --data "$data" --report "$report"
echo "run.sh: done. Model: $model; metrics: $build/metrics.csv; pictures: $report/*.png"
echo "run.sh: classify your own images with: $lenet5 predict --model $model IMAGE..."
