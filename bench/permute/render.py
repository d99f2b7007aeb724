"""Tables of docs/bench/permute.md from bench/results/permute.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import header, ordered, tables, timing_sentence, variant_table  # noqa: E402

NAME = "permute"


def render(records):
    out = header("permute", records, "bench/permute/bench_permute.cpp")
    copy = ordered(r.peak_gbps for r in records if r.peak_gbps)
    if copy:
        out.append(f"- Measured device copy bandwidth (cudaMemcpy D2D 512 MiB, read + write): **{copy[0]:.0f} GB/s**")
    out.append("- Cells: " + timing_sentence(records).replace("Median", "median") +
               ". bf16 hidden rows, uniform ids (distinct per token). GB/s (shown from 100) = least traffic "
               "(ids and hidden read once, one row written per slot, inverse written) / time. Bold: fastest. "
               "`auto →`: what `auto` picks. FAIL: output breaks permute's rules against the CPU reference. "
               "Earlier CLI sweeps and analysis: [permute-notes.md](permute-notes.md).")
    for title, recs in tables(records):
        out += variant_table(title, recs)
    return "\n".join(out) + "\n"
