"""Tables of docs/bench/act-and-mul.md from bench/results/act_and_mul.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import (auto_pick, best_row, cells_line, copy_bandwidth_lines, header, md_table, ordered,  # noqa: E402
                    tables)

NAME = "act-and-mul"

# The reference points (same H100 model, graph replay), bf16 silu:
# (tokens, d) -> (FlashInfer, torch.compile) as µs or TB/s.
ACT_REFS = [
    (1, 4096, ("us", 1.85), ("us", 1.32)),
    (1, 14336, ("us", 4.33), None),
    (16384, 4096, ("tbs", 3.07), ("tbs", 3.02)),
    (16384, 14336, ("tbs", 2.27), None),
    (16384, 18432, ("tbs", 2.51), None),
]
ACT_TARGET_TBS = 2.9  # auto, bf16 silu, >= 4096 tokens
ACT_TARGET_ONE_US = 1.3  # auto, bf16 silu, 1 token
ACT_TUNING_TABLE = "flat grid configurations"


def act_cell(r):
    if r is None:
        return ""
    if r.status == "n/a":
        return "n/a"
    if r.status == "error" or r.us is None:
        return "error"
    s = f"{r.us:.2f} µs"
    if r.gbps is not None:
        s += f" · {r.gbps:.0f} GB/s"
        if r.pct_of_peak is not None:
            s += f" ({r.pct_of_peak:.0f}%)"
    if r.status == "fail":
        s += " FAIL"
    return s


def act_ref_text(ref):
    if ref is None:
        return ""
    kind, v = ref
    return f"{v:.2f} µs" if kind == "us" else f"{v:.2f} TB/s"


def act_rows(recs):
    """(tokens, d) -> {variant: record}, in first-appearance order."""
    rows = {}
    for r in recs:
        rows.setdefault((r.params.get("tokens"), r.params.get("d")), {})[r.variant] = r
    return rows


def act_table(title, recs):
    variants = ordered(r.variant for r in recs)
    body = []
    for (t, d), cells in act_rows(recs).items():
        body.append(best_row([t, d], cells, variants, act_cell) + [auto_pick(cells)])
    return ["", f"### {title}", "", md_table(["tokens", "d"] + variants + ["auto →"],
                                            ["---:", "---:"] + ["---"] * (len(variants) + 1), body)]


def render(records):
    out = header("act-and-mul", records, "bench/act_and_mul/bench_act.cpp")
    main = [r for r in records if r.table != ACT_TUNING_TABLE]
    tune = [r for r in records if r.table == ACT_TUNING_TABLE]
    out += copy_bandwidth_lines(records)
    out.append(cells_line(
        records, ". GB/s = (input read once + "
        "output written once) / time, and % of the copy bandwidth. Inputs below 2x L2 rotate through copies "
        "so the rotation exceeds L2. Bold: fastest. `auto →`: what `auto` picks. FAIL: output differs from "
        "the CPU reference on sampled rows."))
    out.append("- Variants: " + " ".join(f"`{v}`" for v in ordered(r.variant for r in main)) +
               " (see docs/act-and-mul.md).")

    # bf16 silu cells by (tokens, d), for the reference points and targets.
    bf16 = {}
    for r in main:
        p = r.params
        if p.get("dtype") == "bf16" and p.get("act") == "silu":
            bf16.setdefault((p.get("tokens"), p.get("d")), {})[r.variant] = r

    def auto_of(t, d):
        cells = bf16.get((t, d), {})
        for c in cells.values():
            pick = c.extra.get("auto_pick")
            if pick:
                return cells.get(pick)
        return None

    out += ["", "## Targets and reference points (bf16, silu)", ""]
    body = []
    for t, d, fi, tc in ACT_REFS:
        a = auto_of(t, d)
        s = bf16.get((t, d), {}).get("vectorized")
        ratio = ""
        if a is not None and a.measured:
            if fi[0] == "us":
                ratio = f"{fi[1] / a.us:.2f}x faster"
            elif a.gbps is not None:
                ratio = f"{a.gbps / 1000.0 / fi[1]:.2f}x bandwidth"
        body.append([f"{t} x {d}", act_ref_text(fi), act_ref_text(tc), act_cell(s), act_cell(a), ratio])
    out.append(md_table(["shape (tokens x d)", "FlashInfer", "torch.compile", "vectorized (seed)", "auto",
                         "auto vs FlashInfer"], ["---"] * 6, body))
    out += ["", "FlashInfer and torch.compile numbers are the issue's (same H100 model, graph replay), not "
            "re-measured here.", "", "Targets (auto, bf16 silu):", ""]
    for d in ordered(d for (_, d) in bf16):
        big = [auto_of(t, d) for t in (4096, 16384)]
        big = [a.gbps / 1000.0 for a in big if a is not None and a.measured and a.gbps]
        one = auto_of(1, d)
        if not big or one is None or not one.measured:
            continue
        worst = min(big)
        out.append(f"- d = {d}: >= 4096 tokens at least {worst:.2f} TB/s (target {ACT_TARGET_TBS}: "
                   f"{'met' if worst >= ACT_TARGET_TBS else 'missed'}); 1 token {one.us:.2f} µs (target "
                   f"{ACT_TARGET_ONE_US}: {'met' if one.us <= ACT_TARGET_ONE_US else 'missed'})")

    out += ["", "## Every variant"]
    for title, recs in tables(main):
        out += act_table(title, recs)
    if tune:
        out += ["", "## Tuning candidates of the flat grid (bf16, silu; not variants)", "",
                "`nN-uU-bB-pP`: N elements per vector, U vectors per thread, B threads per block, grid capped at "
                "P blocks per SM with grid-stride (0: one block per chunk). `flat` is n8-u1-b256-p0, `spread` "
                "n2-u1-b128-p0."]
        out += act_table(ACT_TUNING_TABLE, tune)
    return "\n".join(out) + "\n"
