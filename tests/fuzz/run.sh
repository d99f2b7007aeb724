#!/usr/bin/env bash
# Builds and runs the libFuzzer target for the .npy reader (tests/fuzz/fuzz_npy.cpp)
# with AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   tests/fuzz/run.sh [SECONDS [WORKDIR [libFuzzer options...]]]
#
# SECONDS: fuzzing time (default 60). WORKDIR (default build-fuzz/): the binary,
# the seeds (tests/npy's malformed corpus), the growing corpus (kept between
# runs) and crash artifacts. Exit 0: no finding; 1: a crash or a broken property
# (reproduce with WORKDIR/fuzz_npy ARTIFACT); 77: no clang with libFuzzer here
# (Debian: apt-get install clang libclang-rt-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
work=${2:-$root/build-fuzz}
shift $(($# > 2 ? 2 : $#))
cxx=${FUZZ_CXX:-clang++}
python=${PYTHON:-python3}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found (apt-get install clang libclang-rt-dev): skipped"
  exit 77
fi
mkdir -p "$work/corpus" "$work/artifacts"
bin=$work/fuzz_npy
srcs=("$root/tests/fuzz/fuzz_npy.cpp" "$root/src/npy.cpp" "$root/src/outputs.cpp")
deps=("${srcs[@]}" "$root"/src/*.hpp "$0")
stale=0
[ -x "$bin" ] || stale=1
for f in "${deps[@]}"; do [ "$f" -nt "$bin" ] && stale=1; done
if [ "$stale" = 1 ]; then
  echo "fuzz: building $bin"
  if ! "$cxx" -std=c++20 -g -O1 -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -DFMT_HEADER_ONLY -I"$root/src" "${srcs[@]}" -o "$bin.new" 2>"$work/build.log"; then
    if grep -q "fuzzer" "$work/build.log" && grep -qi "no such file\|cannot find\|not found" "$work/build.log"; then
      echo "fuzz: $cxx has no libFuzzer runtime (apt-get install libclang-rt-dev): skipped"
      exit 77
    fi
    cat "$work/build.log" >&2
    exit 1
  fi
  mv "$bin.new" "$bin"
fi
"$python" "$root/tests/npy/npy_corpus.py" --write "$work/seeds"
echo "fuzz: $secs s, corpus $work/corpus, seeds $(ls "$work/seeds" | wc -l) malformed/valid files"
# New inputs go to the first directory; the seeds are read only.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
  -dict="$root/tests/fuzz/npy.dict" -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$work/seeds"
