#!/usr/bin/env bash
# Builds and runs a libFuzzer target with AddressSanitizer and
# UndefinedBehaviorSanitizer: the .npy reader (tests/fuzz/fuzz_npy.cpp, the
# default) or, with FUZZ_TARGET=readers, the JSON/JSON-lines/CSV readers of
# `trace import`, `compare` and `plot` (tests/fuzz/fuzz_readers.cpp).
#
#   [FUZZ_TARGET=npy|readers] tests/fuzz/run.sh [SECONDS [WORKDIR [libFuzzer options...]]]
#
# SECONDS: fuzzing time (default 60). WORKDIR (default build-fuzz/): the binary,
# the seeds (npy: tests/npy's malformed corpus; readers: tests/fuzz/seeds/),
# the growing corpus (kept between runs) and crash artifacts, per target.
# Exit 0: no finding; 1: a crash or a broken property (reproduce with
# WORKDIR/fuzz_TARGET ARTIFACT); 77: no clang with libFuzzer here
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
target=${FUZZ_TARGET:-npy}
case "$target" in
  npy) srcs=("$root/tests/fuzz/fuzz_npy.cpp" "$root/src/npy.cpp" "$root/src/outputs.cpp") ;;
  readers) srcs=("$root/tests/fuzz/fuzz_readers.cpp" "$root/src/records.cpp" "$root/src/trace_import.cpp"
                 "$root/src/compare.cpp" "$root/src/npy.cpp" "$root/src/outputs.cpp") ;;
  *) echo "fuzz: unknown FUZZ_TARGET '$target' (npy or readers)" >&2; exit 2 ;;
esac
corpus=$work/corpus-$target
[ "$target" = npy ] && corpus=$work/corpus  # where earlier runs kept it
mkdir -p "$corpus" "$work/artifacts"
bin=$work/fuzz_$target
deps=("${srcs[@]}" "$root"/src/*.hpp "$0")
stale=0
[ -x "$bin" ] || stale=1
for f in "${deps[@]}"; do [ "$f" -nt "$bin" ] && stale=1; done
if [ "$stale" = 1 ]; then
  echo "fuzz: building $bin"
  if ! "$cxx" -std=c++20 -g -O1 -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -DFMT_HEADER_ONLY -I"$root/src" -I"$root/kernels" "${srcs[@]}" -o "$bin.new" 2>"$work/build-$target.log"; then
    if grep -q "fuzzer" "$work/build-$target.log" && grep -qi "no such file\|cannot find\|not found" "$work/build-$target.log"; then
      echo "fuzz: $cxx has no libFuzzer runtime (apt-get install libclang-rt-dev): skipped"
      exit 77
    fi
    cat "$work/build-$target.log" >&2
    exit 1
  fi
  mv "$bin.new" "$bin"
fi
if [ "$target" = npy ]; then
  seeds=$work/seeds
  "$python" "$root/tests/npy/npy_corpus.py" --write "$seeds"
  dict=$root/tests/fuzz/npy.dict
else
  seeds=$root/tests/fuzz/seeds
  dict=$root/tests/fuzz/readers.dict
fi
echo "fuzz: $target, $secs s, corpus $corpus, seeds $(ls "$seeds" | wc -l) files"
# New inputs go to the first directory; the seeds are read only.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
  -dict="$dict" -artifact_prefix="$work/artifacts/$target-" "$@" "$corpus" "$seeds"
