"""Tables of docs/bench/experts.md from bench/results/experts.jsonl (run by bench/render.py).

The generic tables show µs and GB/s of all traffic; an expert FFN is judged by
the active experts' weight bytes per second (decode) and by TFLOP/s (prefill),
so each cell shows both (the record's extra "weight_tbps" and "tflops")."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import auto_pick, best_row, cells_line, copy_bandwidth_lines, header, md_table, ordered, tables  # noqa: E402

NAME = "experts"
SKIPPED = "skipped by the bench"  # the time rule's n/a (bench_experts.cpp)


def cell(r):
    """µs · active-weight TB/s · TFLOP/s; "n/a", "skipped" (the time rule), "error"; FAIL where the check failed."""
    if r is None:
        return ""
    if r.status == "n/a":
        return "skipped" if SKIPPED in ((r.obj.get("error") or {}).get("message") or "") else "n/a"
    if r.status == "error" or r.us is None:
        return "error"
    s = f"{r.us:.1f} µs"
    if r.extra.get("weight_tbps") is not None:
        s += f" · {r.extra['weight_tbps']:.2f} TB/s"
    if r.extra.get("tflops") is not None:
        s += f" · {r.extra['tflops']:.0f} TFLOP/s"
    if r.status == "fail":
        s += " FAIL"
    return s


def model_table(title, recs):
    variants = ordered(r.variant for r in recs)
    rows = {}
    for r in recs:
        rows.setdefault(r.params.get("tokens"), {})[r.variant] = r
    body = [best_row([t], cells, variants, text=cell) + [auto_pick(cells)] for t, cells in rows.items()]
    return ["", f"### {title}", "", md_table(["tokens"] + variants + ["auto →"],
                                            ["---:"] + ["---"] * (len(variants) + 1), body)]


def render(records):
    out = header("experts", records, "bench/experts/bench_experts.cpp")
    out += copy_bandwidth_lines(records)
    out.append(cells_line(records,
                          " (fewer samples and launches per graph for long launches), the whole expert computation "
                          "(layout, FFN, combine; `fused`: its one kernel). bf16, silu, generated weights, K distinct uniform experts per token. "
                          "TB/s = the active experts' W1 and W2 bytes / time (the decode figure); TFLOP/s = 6 T K H I "
                          "/ time (the prefill figure). Bold: fastest. `auto →`: what `auto` picks. skipped: not run "
                          "(a smaller T of that variant took over 50 ms). FAIL: out differs from the CPU reference on "
                          "the sampled tokens."))
    for title, recs in tables(records):
        out += model_table(title, recs)
    return "\n".join(out) + "\n"
