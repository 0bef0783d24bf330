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

# Where the distribution packages them (Debian 12 does): clang 19 for the clang build of the host tests
# in test.sh (the layers' float template parameters need clang >= 18), clang 14 for the test
# static.io_clang14. Without recommends: the compiler alone, not LLVM's development files.
maybe=()
command -v clang++-19 >/dev/null || maybe+=(clang-19)
command -v clang++-14 >/dev/null || maybe+=(clang-14)

if [ ${#need[@]} -eq 0 ] && [ ${#maybe[@]} -eq 0 ]; then
  echo "install_deps: all dependencies present"
  exit 0
fi
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    [ ${#need[@]} -eq 0 ] || { echo "install_deps: need root or sudo to install: ${need[*]}" >&2; exit 1; }
    echo "install_deps: not installed (no root or sudo): ${maybe[*]}; test.sh skips what needs them"
    exit 0
  fi
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists are refreshed for what is needed; an optional package alone is looked up in them as
# they are.
[ ${#need[@]} -eq 0 ] || "${sudo_cmd[@]}" apt-get update -q
extra=()
for p in "${maybe[@]}"; do
  if apt-cache show "$p" >/dev/null 2>&1; then
    extra+=("$p")
  else
    echo "install_deps: $p is not packaged here (or the package lists are old); test.sh skips what needs it"
  fi
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install_deps: installing ${need[*]}"
  "${sudo_cmd[@]}" apt-get install -y -q "${need[@]}"
fi
if [ ${#extra[@]} -gt 0 ]; then
  echo "install_deps: installing ${extra[*]}"
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${extra[@]}"
fi
