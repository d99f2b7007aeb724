#!/bin/bash
# Device run for the align family: GPU test, sanitizers on the subset, bench.
# Copy build-*/tests/align/gpu_align, build-*/bench/align/bench_align and this
# script into .dev/align/, then on the device: bash .dev/align/device_run.sh
cd "$(dirname "$0")"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi -L > $OUT/env.log 2>&1; echo "sanitizer: $CS" >> $OUT/env.log; ls -la $CS >> $OUT/env.log 2>&1
timeout 150 ./gpu_align > $OUT/gpu.log 2>&1; echo "gpu_align rc=$?" >> $OUT/gpu.log
timeout 50 $CS --tool memcheck --error-exitcode 9 ./gpu_align -tc="sanitizer subset" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck.log
timeout 60 $CS --tool racecheck --error-exitcode 9 ./gpu_align -tc="sanitizer subset" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?" >> $OUT/racecheck.log
timeout 150 ./bench_align > $OUT/bench.md 2> $OUT/bench.err; echo "bench rc=$?" >> $OUT/bench.err
echo "=== env"; cat $OUT/env.log
echo "=== gpu"; grep -E "FAIL|align GPU|rc=|ERROR|error|doctest\] (test|assert)" $OUT/gpu.log | head -40
echo "=== memcheck"; grep -E "FAIL|align GPU|rc=|ERROR SUMMARY|Invalid" $OUT/memcheck.log | head -15
echo "=== racecheck"; grep -E "FAIL|align GPU|rc=|RACECHECK SUMMARY|ERROR SUMMARY|hazard" $OUT/racecheck.log | head -15
echo "=== bench"; cat $OUT/bench.err | tail -5; cat $OUT/bench.md
