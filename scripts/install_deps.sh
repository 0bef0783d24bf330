#!/usr/bin/env bash
# Installs what ctnn's build, tests and examples need on Debian/Ubuntu, if it is missing.
# The CUDA toolkit (nvcc, cuBLAS) is expected to be installed already.
set -euo pipefail

need=()
[ -f /usr/include/boost/hana.hpp ]      || need+=(libboost-dev)
[ -f /usr/include/catch2/catch.hpp ]    || need+=(catch2)
[ -f /usr/include/zlib.h ]              || need+=(zlib1g-dev)
[ -f /usr/include/stb/stb_image.h ]     || need+=(libstb-dev)
[ -f /usr/include/CLI/CLI.hpp ]         || need+=(libcli11-dev)
command -v pkg-config >/dev/null        || need+=(pkg-config)
command -v cmake >/dev/null             || need+=(cmake)
command -v g++ >/dev/null               || need+=(g++)
# clang with libFuzzer and the ASan/UBSan runtimes, for scripts/fuzz.sh (the fuzz pass of test.sh).
if ! command -v clang++ >/dev/null; then
  need+=(clang libclang-rt-dev)
elif [ ! -f "$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a" ]; then
  need+=("libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev")
fi

if [ ${#need[@]} -eq 0 ]; then
  echo "install_deps: all dependencies present"
  exit 0
fi
echo "install_deps: installing ${need[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install: ${need[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q "${need[@]}"
