"""Tables of docs/bench/combine.md from bench/results/combine.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import variant_page  # noqa: E402

NAME = "combine"


def render(records):
    return variant_page("combine", records, "bench/combine/bench_combine.cpp",
                        ". P = T*K bf16 rows, a shuffled one-to-one inverse map, S = 1. GB/s (shown from 100) = (each used "
                        "row read once + out written once + inverse and weights read) / time. Bold: fastest. `auto →`: "
                        "what `auto` picks. FAIL: output differs from the CPU reference (bit for bit where the variant "
                        "keeps the order, else beyond the order-free tolerance). Earlier CLI sweeps and analysis: "
                        "[combine-notes.md](combine-notes.md).", key="tokens")
