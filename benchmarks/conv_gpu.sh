#!/usr/bin/env bash
# On the GPU machine, from the repository root: builds the conv test and benchmark (only those), then
# runs the stages named on the command line (default: test bench):
#   test      tests/gpu/test_kernel_conv.cu
#   bench     benchmarks/conv_bench (per-layer table)
#   sanitize  compute-sanitizer memcheck and racecheck on the conv test
#   sass      the benchmark's machine code, gzipped
#   ncu       Nsight Compute on one call of each conv kernel of the benchmark
# Logs go to $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
build=${CONV_BUILD:-/tmp/build-conv}
vendor=()
[ -d .vendor ] && vendor=(-DCTNN_VENDOR_DIR="$PWD/.vendor")
nvidia-smi -L
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTNN_BUILD_TESTS=ON -DCTNN_BUILD_BENCHMARKS=ON \
  -DCTNN_BUILD_EXAMPLES=OFF "${vendor[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j16 --target gpu_test_kernel_conv conv_bench >"$out/build.log" 2>&1 ||
  { grep -E "error" "$out/build.log" | head -40; exit 1; }
failed=0
for stage in ${*:-test bench}; do
  case $stage in
    test)
      "$build/tests/gpu/gpu_test_kernel_conv" >"$out/test.log" 2>&1 || failed=1
      grep -E "^FAIL|passed" "$out/test.log" | head -40 ;;
    bench)
      "$build/benchmarks/conv_bench" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" || failed=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        CTNN_QUICK=1 timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/tests/gpu/gpu_test_kernel_conv" >"$out/sanitize-$tool.log" 2>&1 || failed=1
        echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool.log" | tail -1) $(grep -E 'passed' "$out/sanitize-$tool.log" | tail -1)"
      done ;;
    sass)
      cuobjdump -sass "$build/benchmarks/conv_bench" | gzip >"$out/conv_bench.sass.gz" ;;
    ncu)
      # NCU_KERNELS: a regex on mangled names (default: every kernel of the 32->32 layer at 32x32).
      ncu ${NCU_SECTIONS:---section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats} \
        --kernel-name-base mangled -k "regex:${NCU_KERNELS:-ConvDimsILi32ELi32ELi32ELi32ELi3ELi1ELi1ELi1E}" -c "${NCU_COUNT:-40}" \
        -o "$out/conv" "$build/benchmarks/conv_bench" 1 1 >"$out/ncu.log" 2>&1 || failed=1
      ncu --import "$out/conv.ncu-rep" --page details --csv >"$out/ncu.csv" 2>/dev/null
      tail -3 "$out/ncu.log" ;;
  esac
done
exit $failed
