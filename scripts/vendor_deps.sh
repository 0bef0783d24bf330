#!/usr/bin/env bash
# Copies the third-party headers (and zlib's static library) that ctnn's build needs from this
# machine's system into DIR (default: <repo>/.vendor, git-ignored), laid out as an install prefix:
#
#   DIR/include/{boost/hana*,boost/config*,...,catch2,CLI,stb,zlib.h,zconf.h}
#   DIR/lib/libz.a
#   DIR/<same relative paths as on this system>/cmake/{Boost-*,boost_headers-*,Catch2,CLI11}
#
# For a machine that has a CUDA toolkit and CMake but not these packages (the GPU machine): carry
# DIR there and configure with -DCTNN_VENDOR_DIR=$PWD/.vendor (cmake/ctnnVendor.cmake); the copies
# are then used before anything the system has. Only the Boost headers that Hana needs are copied
# (the closure `g++ -M` reports, plus all of boost/hana and boost/config), so DIR stays small.
#
# Usage: scripts/vendor_deps.sh [DIR]
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
dir=${1:-$repo_root/.vendor}
max_mib=20

die() { echo "vendor_deps.sh: error: $*" >&2; exit 1; }
cxx=${CXX:-g++}
command -v "$cxx" >/dev/null || die "no C++ compiler '$cxx' on PATH (set CXX)"

# Where the compiler finds a header: its first dependency of that name in `-M` output.
header_path() {
  local h=$1 p
  p=$(echo "#include <$h>" | "$cxx" -std=c++20 -x c++ -M - 2>/dev/null | tr ' \\' '\n\n' |
      grep -m1 -F "/$h") || true
  [[ -n $p && -f $p ]] || die "<$h> not found by $cxx; install it first (scripts/install_deps.sh)"
  echo "$p"
}

# The include directory that holds <h> (e.g. /usr/include for boost/hana.hpp).
include_root() { local p; p=$(header_path "$1"); echo "${p%/"$1"}"; }

# One CMake package config directory, searched in the usual install prefixes; prints
# "<prefix> <dir relative to prefix>".
config_dir() {
  local pattern=$1 prefix d
  for prefix in /usr /usr/local; do
    for d in "$prefix"/lib/*/cmake/$pattern "$prefix"/lib/cmake/$pattern "$prefix"/share/cmake/$pattern \
             "$prefix"/share/$pattern/cmake; do
      [[ -d $d ]] && { echo "$prefix ${d#"$prefix"/}"; return 0; }
    done
  done
  die "no CMake package directory matching '$pattern' under /usr or /usr/local"
}

tmp="$dir.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include" "$tmp/lib"

# Copies FILE (absolute) found under include root ROOT to the same relative path in tmp/include.
copy_header() {
  local root=$1 file=$2 rel=${2#"$1"/}
  mkdir -p "$tmp/include/$(dirname "$rel")"
  cp -p "$file" "$tmp/include/$rel"
}

# Copies a package's CMake config directory to the same path relative to the prefix, so the
# config's own relative lookups (e.g. "../../../include") land in tmp/include.
copy_config() {
  local where prefix rel
  where=$(config_dir "$1")
  prefix=${where%% *} rel=${where#* }
  mkdir -p "$tmp/$(dirname "$rel")"
  cp -rp "$prefix/$rel" "$tmp/$rel"
  echo "  cmake  $prefix/$rel"
  # Libraries the package's exported targets name (e.g. Catch2's libCatch2WithMain.a): CMake refuses
  # a package whose files are missing.
  local lib
  for lib in $(grep -ho '${_IMPORT_PREFIX}/lib/[^" ]*' "$tmp/$rel"/*.cmake | sed 's|^${_IMPORT_PREFIX}/||' | sort -u); do
    [[ -f $prefix/$lib ]] || die "$prefix/$rel names $prefix/$lib, which does not exist"
    mkdir -p "$tmp/$(dirname "$lib")"
    cp -p "$prefix/$lib" "$tmp/$lib"
    echo "  lib    $prefix/$lib"
  done
}

# --- Boost.Hana: the headers it includes, in both the host compiler's and (if present) nvcc's view.
boost_root=$(include_root boost/hana.hpp)
deps=$(echo '#include <boost/hana.hpp>' | "$cxx" -std=c++20 -x c++ -M - | tr ' \\' '\n\n')
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo '#include <boost/hana.hpp>' >"$tmp/probe.cu"
  deps+=$'\n'$("$nvcc_bin" -std=c++20 -M "$tmp/probe.cu" | tr ' \\' '\n\n')
  rm -f "$tmp/probe.cu"
fi
{
  grep -F "$boost_root/boost/" <<<"$deps" || true
  find "$boost_root/boost/hana" "$boost_root/boost/config" -type f
  ls "$boost_root"/boost/{hana,config,version}.hpp
} | sort -u | while read -r f; do copy_header "$boost_root" "$f"; done
echo "  boost  $(find "$tmp/include/boost" -type f | wc -l) headers from $boost_root/boost"
copy_config 'Boost-*'
copy_config 'boost_headers-*'

# --- Catch2 v2 (single header), CLI11, stb: whole directories.
for h in catch2/catch.hpp CLI/CLI.hpp stb/stb_image.h; do
  root=$(include_root "$h")
  cp -rp "$root/${h%%/*}" "$tmp/include/"
  echo "  $(printf '%-6s' "${h%%/*}") $root/${h%%/*}"
done
copy_config Catch2
copy_config CLI11

# --- zlib: headers and the static library (a static link needs nothing from the other machine).
zroot=$(include_root zlib.h)
cp -p "$zroot/zlib.h" "$tmp/include/"
cp -p "$(header_path zconf.h)" "$tmp/include/"
libz=$("$cxx" -print-file-name=libz.a)
[[ -f $libz ]] || die "libz.a not found by $cxx -print-file-name (install zlib1g-dev)"
cp -p "$libz" "$tmp/lib/libz.a"
echo "  zlib   $zroot/zlib.h, $libz"

size_kib=$(du -sk "$tmp" | cut -f1)
((size_kib <= max_mib * 1024)) || die "vendored tree is $((size_kib / 1024)) MiB, over the $max_mib MiB budget"

rm -rf "$dir.old.$$"
[[ -e $dir ]] && mv "$dir" "$dir.old.$$"
mv "$tmp" "$dir"
rm -rf "$dir.old.$$"
trap - EXIT
echo "vendored into $dir ($((size_kib / 1024)) MiB); configure with -DCTNN_VENDOR_DIR=$dir"
