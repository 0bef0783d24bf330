#!/usr/bin/env bash
# Builds ctnn's libFuzzer harnesses (fuzz/fuzz_*.cpp) with clang++ and AddressSanitizer +
# UndefinedBehaviorSanitizer, then runs each for SECONDS (default 10) on its seed corpus
# (fuzz/corpus/<target>, plus fuzz/regressions/<target> where it exists; never modified: new inputs
# go to the build directory). Every file parser must answer any input with a value or a
# ctnn::io_error within the time (10 s per input) and memory (2 GiB) limits. Exits 1 if any target
# finds a crash, a sanitizer report, a timeout or an out-of-memory, and names the saved input; add it
# to fuzz/regressions/<target>, where a host test checks that it is refused.
#
# Usage: scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]      targets: the fuzz/fuzz_<target>.cpp names
# Environment: CTNN_FUZZ_BUILD (default <repo>/build-fuzz), CXX_FUZZ (default clang++, else clang++-14),
#              CTNN_FUZZ_JOBS (parallel targets, default 1).
# A long run, e.g. an hour per target in the background:  nice -n 19 scripts/fuzz.sh 3600
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CTNN_FUZZ_BUILD:-$root/build-fuzz}
seconds=${1:-10}
shift || true
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }

cxx=${CXX_FUZZ:-}
if [[ -z $cxx ]]; then
  for c in clang++ clang++-14; do command -v "$c" >/dev/null && { cxx=$c; break; }; done
fi
[[ -n $cxx ]] || { echo "fuzz.sh: clang++ not found (scripts/install_deps.sh installs clang)" >&2; exit 2; }

targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in "$root"/fuzz/fuzz_*.cpp; do t=${f##*/fuzz_}; targets+=("${t%.cpp}"); done
fi

mkdir -p "$build"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Wall -Wextra -I "$root/include" -I "$root/fuzz")
echo "fuzz.sh: building ${#targets[@]} harnesses with $cxx"
for t in "${targets[@]}"; do
  src=$root/fuzz/fuzz_$t.cpp
  [[ -f $src ]] || { echo "fuzz.sh: no harness $src" >&2; exit 2; }
  # Rebuild only when the harness or a header is newer than the binary.
  if [[ ! -x $build/fuzz_$t ]] || [[ -n $(find "$src" "$root/include" "$root/fuzz/fuzz_common.hpp" -newer "$build/fuzz_$t" -print -quit) ]]; then
    "$cxx" "${flags[@]}" "$src" -lz -o "$build/fuzz_$t.tmp" || { echo "fuzz.sh: building $t failed" >&2; exit 2; }
    mv "$build/fuzz_$t.tmp" "$build/fuzz_$t"
  fi
done

# The safetensors harness writes each input to a file: on tmpfs that is 10x faster than on disk.
[[ -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm

run_one() {
  local t=$1 work=$build/run/$1
  mkdir -p "$work/corpus" "$work/crashes"
  # Past findings (fuzz/regressions/<target>, answered with an io_error) seed the run as well.
  local seeds=("$root/fuzz/corpus/$t")
  [[ -d $root/fuzz/regressions/$t ]] && seeds+=("$root/fuzz/regressions/$t")
  # ASan's default for allocations it cannot satisfy is to report them: keep it, so a size taken from
  # a file that is not checked first shows up as a finding.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/crashes/" \
      "$work/corpus" "${seeds[@]}" >"$work/log" 2>&1
}

status=0
for t in "${targets[@]}"; do
  rc=0
  run_one "$t" || rc=$?
  log=$build/run/$t/log
  execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  crashes=$(find "$build/run/$t/crashes" -type f | wc -l)
  if ((rc == 0 && crashes == 0)); then
    printf 'fuzz.sh: %-12s %10s runs in %ss, no findings\n' "$t" "$execs" "$seconds"
  else
    status=1
    printf 'fuzz.sh: %-12s FINDING (exit %s) after %s runs; inputs in %s; log %s\n' "$t" "$rc" "$execs" \
      "$build/run/$t/crashes" "$log" >&2
    grep -m5 -E 'ERROR|runtime error|SUMMARY|terminate|Timeout|out-of-memory' "$log" >&2 || tail -n 20 "$log" >&2
  fi
done
exit $status
