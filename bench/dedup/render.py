"""Tables of docs/bench/dedup.md from bench/results/dedup.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import load, ordered, tables, md_table, header, timing_sentence  # noqa: E402

NAME = "dedup"

DEDUP_VALUES = {
    "uniform": "(a) uniform values in [0, 2^31)",
    "realistic": "(b) realistic rows: values < 131072, consecutive rows share 80%",
}
DEDUP_SHORT = {"uniform": "(a) uniform", "realistic": "(b) realistic"}


def dedup_cell(r):
    if r is None:
        return ""
    if r.status == "n/a":
        return "n/a"
    if r.status == "fail":
        return "wrong"
    if r.status == "error" or r.us is None:
        return "error"
    return f"{r.us:.1f}"


def varying(recs, skip=()):
    """Parameters that take more than one value within these records."""
    keys = ordered(k for r in recs for k in r.params)
    return [k for k in keys if k not in skip and len(ordered(r.params.get(k) for r in recs)) > 1]


def render(records):
    out = header("dedup", records, "bench/dedup/bench_dedup.cpp")
    out.append(timing_sentence(records) + ", input copies rotated so the rotation exceeds L2"
               " (`moekit::time_launches`). \"n/a\": the variant does not take that shape; "
               "\"wrong\": its output differed from the CPU reference (checked before timing).")
    tuning = [r for r in records if "tile" in r.params]
    for title, recs in tables([r for r in records if "tile" not in r.params]):
        cols = varying(recs)
        key = cols[0] if cols else "M"
        colvals = ordered(r.params.get(key) for r in recs)
        variants = ordered(r.variant for r in recs)
        body = []
        for v in variants:
            cells = {r.params.get(key): r for r in recs if r.variant == v}
            body.append([v] + [dedup_cell(cells.get(c)) for c in colvals])
        out += ["", f"## {title}", "", md_table(["variant"] + [f"{key}={c}" for c in colvals], ["---"] + ["---:"] * len(colvals), body)]
    if tuning:
        out += ["", "## Tuning (bs=115, k=2048, M = tile/2048)", "",
                "The same kernels at other block shapes (threads x items per thread), digit widths and sort "
                "algorithms, and the I/O floor of a one-CTA-per-row kernel (load, one block reduction, store -1).", ""]
        kinds = ordered(r.params.get("values") for r in tuning)
        rows = ordered((r.params.get("tile"), r.variant) for r in tuning)
        body = []
        for tile, name in rows:
            cells = {r.params.get("values"): r for r in tuning if r.params.get("tile") == tile and r.variant == name}
            body.append([tile, name] + [dedup_cell(cells.get(k)) for k in kinds])
        out.append(md_table(["tile", "configuration"] + [DEDUP_SHORT.get(k, k) for k in kinds],
                            ["---:", "---"] + ["---:"] * len(kinds), body))
    return "\n".join(out) + "\n"
