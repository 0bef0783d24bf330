#!/usr/bin/env bash
# On the GPU machine, from the repository root: builds the conv tests and benchmarks (only those), then
# runs the stages named on the command line (default: test bench):
#   test      tests/gpu/test_kernel_conv.cu, test_kernel_conv_tf32.cu, test_kernel_conv_wgmma.cu and
#             test_conv_wgmma_network.cu (the last two skip, exit 77, without sm_90a device code)
#   bench     benchmarks/conv_bench (per-layer table, FP32 and TF32)
#   cifar     benchmarks/cifar_bench --math fp32,tf32 (epoch times; CIFAR_ARGS adds options)
#   sanitize  compute-sanitizer memcheck and racecheck on the conv tests (SAN_TESTS: which; CTNN_ONLY=text
#             keeps only the test cases whose name contains the text)
#   sass      the benchmark's machine code, gzipped
#   ncu       Nsight Compute on one call of each conv kernel of the benchmark
# Logs go to $OUT (or ./gpu-out). With CONV_BIN=dir the binaries built elsewhere (dir/conv_bench,
# dir/cifar_bench, dir/gpu_test_kernel_conv, dir/gpu_test_kernel_conv_tf32, dir/gpu_test_kernel_conv_wgmma,
# dir/gpu_test_conv_wgmma_network) run instead: no build.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
build=${CONV_BUILD:-/tmp/build-conv}
vendor=()
[ -d .vendor ] && vendor=(-DCTNN_VENDOR_DIR="$PWD/.vendor")
nvidia-smi -L
if [ -n "${CONV_BIN:-}" ]; then
  bin=$CONV_BIN; test_bin=$CONV_BIN
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTNN_BUILD_TESTS=ON -DCTNN_BUILD_BENCHMARKS=ON \
    -DCTNN_BUILD_EXAMPLES=OFF "${vendor[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j16 --target gpu_test_kernel_conv gpu_test_kernel_conv_tf32 gpu_test_kernel_conv_wgmma \
    gpu_test_conv_wgmma_network conv_bench cifar_bench \
    >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -40; exit 1; }
  bin=$build/benchmarks; test_bin=$build/tests/gpu
fi
failed=0
for stage in ${*:-test bench}; do
  case $stage in
    test)
      for t in kernel_conv kernel_conv_tf32 kernel_conv_wgmma conv_wgmma_network; do
        "$test_bin/gpu_test_$t" >"$out/test-$t.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] || [ $rc -eq 77 ] || failed=1
        echo "test $t: $(grep -E "^FAIL|passed" "$out/test-$t.log" | head -20)"
      done ;;
    bench)
      "$bin/conv_bench" ${BENCH_ARGS:-} >"$out/bench.log" 2>&1 || failed=1
      grep -E "^device|tf32 mma|\*" "$out/bench.log" | grep -vE "^lenet" ;;
    cifar)
      "$bin/cifar_bench" --math fp32,tf32 ${CIFAR_ARGS:-} 2>&1 | tee "$out/cifar.log" || failed=1 ;;
    sanitize)
      for t in ${SAN_TESTS:-kernel_conv kernel_conv_tf32 kernel_conv_wgmma conv_wgmma_network}; do
        for tool in memcheck racecheck; do
          CTNN_QUICK=1 timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$test_bin/gpu_test_$t" >"$out/sanitize-$t-$tool.log" 2>&1 || failed=1
          echo "$tool $t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$t-$tool.log" | tail -1) $(grep -E 'passed' "$out/sanitize-$t-$tool.log" | tail -1)"
        done
      done ;;
    sass)
      cuobjdump -sass "$bin/conv_bench" | gzip >"$out/conv_bench.sass.gz" ;;
    ncu)
      # NCU_KERNELS: a regex on mangled names (default: every kernel of the 32->32 layer at 32x32).
      ncu ${NCU_SECTIONS:---section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats} \
        --kernel-name-base mangled -k "regex:${NCU_KERNELS:-ConvDimsILi32ELi32ELi32ELi32ELi3ELi1ELi1ELi1E}" -c "${NCU_COUNT:-40}" \
        -o "$out/conv" "$bin/conv_bench" 1 1 >"$out/ncu.log" 2>&1 || failed=1
      ncu --import "$out/conv.ncu-rep" --page details --csv >"$out/ncu.csv" 2>/dev/null
      tail -3 "$out/ncu.log" ;;
  esac
done
exit $failed
