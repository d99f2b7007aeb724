"""Tables of docs/bench/align.md from bench/results/align.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import ordered, tables, md_table, header, timing_sentence  # noqa: E402

NAME = "align"

# The (#5) measurements of SGLang's newest kernel on the same GPU model,
# B = 128, graph replay: (E, topk) -> tokens -> µs.
SGLANG_US = {
    (256, 8): {1: 3.75, 1024: 7.0, 4096: 13.0, 16384: 42.3},
    (64, 8): {1: 3.64, 16384: 60.9},
    (512, 8): {1: 3.84, 16384: 45.8},
    (8, 2): {1: 2.94, 16384: 16.4},
}


def align_target(tokens):
    """Issue #5: auto <= 0.7x SGLang at <= 256 tokens, <= 0.5x at >= 4096."""
    if tokens <= 256:
        return 0.7
    if tokens >= 4096:
        return 0.5
    return None


def align_cell(r):
    if r is None:
        return ""
    if r.status == "n/a":
        return "n/a"
    if r.status == "error" or r.us is None:
        return "ERR"
    if r.status == "fail":
        return "FAIL"
    return f"{r.us:.2f}"


def ids_label(p):
    return "zipf(1.2)" if p.get("ids") == "zipf" else p.get("ids", "uniform")


TRACE_TABLE = "recorded traces"
AUTO_SLACK = 1.05  # issue #13: auto within 5% of the fastest variant on every trace


def trace_table(recs):
    """The recorded-traces section: every variant per (trace, tokens), auto against the fastest."""
    variants = [v for v in ordered(r.variant for r in recs) if v != "auto"]
    keys = ordered((r.params.get("trace"), r.params.get("tokens")) for r in recs)
    body, within, total = [], 0, 0
    for trace, t in keys:
        cells = {r.variant: r for r in recs if r.params.get("trace") == trace and r.params.get("tokens") == t}
        p = next(iter(cells.values())).params
        auto = cells.get("auto")
        timed = {v: c.us for v, c in cells.items() if v != "auto" and c.status == "ok" and c.us is not None}
        best = min(timed, key=timed.get) if timed else None
        verdict = ""
        if auto is not None and auto.measured and best is not None:
            ratio = auto.us / timed[best]
            total += 1
            within += ratio <= AUTO_SLACK
            verdict = f"{ratio:.2f} ({'yes' if ratio <= AUTO_SLACK else 'no'})"
        body.append([trace, p.get("E"), p.get("topk"), p.get("block_size"), t] +
                    [align_cell(cells.get(v)) for v in variants] +
                    [auto.extra.get("picks", "") if auto else "", align_cell(auto), best or "", verdict])
    head = ["trace", "E", "topk", "B", "tokens"] + variants + ["auto picks", "auto", "fastest", "auto / fastest (<= 1.05)"]
    aligns = ["---", "---:", "---:", "---:", "---:"] + ["---:"] * len(variants) + ["---", "---:", "---", "---:"]
    return ["", "## Recorded traces (data/, real router decisions)", "",
            f"Every variant on the bundled traces (data/README.md), whole and as prefixes; `auto` within 5% "
            f"of the fastest variant on {within} of {total} rows.", "", md_table(head, aligns, body)]


def render(records):
    out = header("align", records, "bench/align/bench_align.cpp")
    out.append(
        timing_sentence(records) + " (a variant's whole launch sequence counts as one launch), input "
        "copies rotated so ids do not sit in L2. B = 128, int32 ids, no expert map; every token picks "
        "topk distinct experts (uniform, or zipf(1.2) in the zipf set). Each cell was checked against "
        "the CPU reference once (FAIL otherwise; ERR: the launch or the timing failed). SGLang points "
        "are the issue's measurements of SGLang's newest kernel on the same GPU model, with its own "
        "harness."
    )

    summary = []
    sections = []
    trace_lines = []
    for title, recs in tables(records):
        if title == TRACE_TABLE:
            trace_lines = trace_table(recs)
            continue
        p0 = recs[0].params
        E, topk, ids = p0.get("E"), p0.get("topk"), p0.get("ids", "uniform")
        variants = ordered(r.variant for r in recs)
        rows = ordered(r.params.get("tokens") for r in recs)
        head = ["tokens"] + variants + ["auto picks", "SGLang (issue)", "auto / SGLang"]
        align = ["---:"] * (1 + len(variants)) + ["---", "---:", "---:"]
        body = []
        for t in rows:
            cells = {r.variant: r for r in recs if r.params.get("tokens") == t}
            auto = cells.get("auto")
            picks = auto.extra.get("picks", "") if auto else ""
            sg = SGLANG_US.get((E, topk), {}).get(t)
            ratio = ""
            if sg and auto is not None and auto.measured:
                ratio = f"{auto.us / sg:.2f}"
                target = align_target(t)
                label = f"{E}, {topk}" + (", zipf" if ids == "zipf" else "")
                r3 = auto.us / sg
                summary.append([label, t, picks, f"{auto.us:.2f}", f"{sg:.2f}", f"{r3:.3f}",
                                f"≤ {target:.2f}" if target else "",
                                ("yes" if r3 <= target else "no") if target else ""])
            body.append([t] + [align_cell(cells.get(v)) for v in variants] +
                        [picks, f"{sg:.2f}" if sg else "", ratio])
        sections += ["", f"### E = {E}, topk = {topk}, {ids_label(p0)} ids", "", md_table(head, align, body)]

    out += ["", "## auto against the issue's SGLang points and targets", "",
            "Targets (issue #5): `auto` ≤ 0.7x SGLang at ≤ 256 tokens and ≤ 0.5x at ≥ 4096 tokens; "
            "the issue's \"real goal\" is < 8 µs at 16384 tokens.", ""]
    out.append(md_table(["E, topk, ids", "tokens", "auto picks", "auto µs", "SGLang (issue)",
                         "auto / SGLang", "target", "met"],
                        ["---", "---:", "---", "---:", "---:", "---:", "---:", "---"], summary))
    if trace_lines:
        out += trace_lines
    rule = ordered(r.extra.get("auto_rule") for r in records if r.extra.get("auto_rule"))
    out += ["", "## Measured", ""]
    if rule:
        out.append(f"auto rule: {rule[0]}")
    out += sections
    return "\n".join(out) + "\n"
