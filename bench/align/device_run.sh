#!/bin/bash
# Device run for the align family: GPU test, sanitizers on the subset, bench,
# then (when probe_align is there) harness calibration, the tiny sweep and
# the tiny phase breakdown.
# Copy build-*/tests/align/gpu_align, build-*/bench/align/bench_align,
# build-*/bench/align/probe_align and this script into .dev/<dir>/, then on
# the device: bash .dev/<dir>/device_run.sh
cd "$(dirname "$0")"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi -L > $OUT/env.log 2>&1; echo "sanitizer: $CS" >> $OUT/env.log
SECONDS=0
timeout 100 ./gpu_align > $OUT/gpu.log 2>&1; echo "gpu_align rc=$? t=$SECONDS" >> $OUT/times.txt
timeout 40 $CS --tool memcheck --error-exitcode 9 ./gpu_align -tc="sanitizer subset" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? t=$SECONDS" >> $OUT/times.txt
timeout 50 $CS --tool racecheck --error-exitcode 9 ./gpu_align -tc="sanitizer subset" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? t=$SECONDS" >> $OUT/times.txt
timeout 100 ./bench_align > $OUT/bench.md 2> $OUT/bench.err; echo "bench rc=$? t=$SECONDS" >> $OUT/times.txt
if [ -x ./probe_align ]; then
  timeout 20 ./probe_align calib > $OUT/calib.md 2>&1; echo "calib rc=$? t=$SECONDS" >> $OUT/times.txt
  timeout 60 ./probe_align sweep $OUT/sweep.csv > $OUT/sweep.md 2>&1; echo "sweep rc=$? t=$SECONDS" >> $OUT/times.txt
  timeout 20 ./probe_align phases > $OUT/phases.md 2>&1; echo "phases rc=$? t=$SECONDS" >> $OUT/times.txt
fi
echo "=== env"; cat $OUT/env.log $OUT/times.txt
echo "=== gpu"; grep -E "FAIL|align GPU|ERROR|error|doctest\] (test|assert)" $OUT/gpu.log | head -30
echo "=== memcheck"; grep -E "FAIL|align GPU|ERROR SUMMARY|Invalid" $OUT/memcheck.log | head -10
echo "=== racecheck"; grep -E "FAIL|align GPU|RACECHECK SUMMARY|ERROR SUMMARY|hazard" $OUT/racecheck.log | head -10
echo "=== calib"; cat $OUT/calib.md 2>/dev/null
echo "=== phases"; cat $OUT/phases.md 2>/dev/null
echo "=== sweep"; cat $OUT/sweep.md 2>/dev/null
echo "=== bench"; tail -3 $OUT/bench.err; grep -E "^\| (1|16|64|256|1024|4096) \|" $OUT/bench.md | head -0
