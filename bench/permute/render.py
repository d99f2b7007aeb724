"""Tables of docs/bench/permute.md from bench/results/permute.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import variant_page  # noqa: E402

NAME = "permute"


def render(records):
    return variant_page("permute", records, "bench/permute/bench_permute.cpp",
                        ". bf16 hidden rows, uniform ids (distinct per token). GB/s (shown from 100) = least traffic "
                        "(ids and hidden read once, one row written per slot, inverse written) / time. Bold: fastest. "
                        "`auto →`: what `auto` picks. FAIL: output breaks permute's rules against the CPU reference. "
                        "Earlier CLI sweeps and analysis: [permute-notes.md](permute-notes.md).", key="tokens")
