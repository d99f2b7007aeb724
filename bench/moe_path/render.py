"""Tables of docs/bench/moe-path.md from bench/results/moe_path.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import cells_line, header, md_table, tables, time_cell  # noqa: E402

NAME = "moe-path"
STAGES = ("route", "permute", "combine")
GOAL_US = 10.0  # issue #15: DeepSeek-V3, T = 1, PDL off, the whole path


def stage_us(r, stage):
    """The median µs of `stage` (or of "sum") timed alone: the record's stage_us; None without one."""
    return (r.stages.get(stage) or {}).get("median")


def stage_text(r, stage):
    us = stage_us(r, stage)
    if us is None:
        return ""
    v = r.extra.get(f"stage_variant.{stage}")
    return f"{us:.2f}" + (f" ({v})" if v else "")


def path_table(title, recs):
    body = []
    for r in recs:
        total = stage_us(r, "sum")
        body.append([r.params.get("tokens"), r.variant, time_cell(r)] + [stage_text(r, s) for s in STAGES] +
                    [f"{total:.2f}" if total is not None else ""])
    return ["", f"### {title}", "", md_table(["tokens", "variant", "path"] + [f"{s} µs" for s in STAGES] +
                                            ["stage sum µs"], ["---:", "---", "---"] + ["---:"] * 4, body)]


def render(records):
    out = header("moe-path", records, "bench/moe_path/bench_moe_path.cpp")
    out.append(cells_line(records,
                          " of the whole path; each stage column is that stage timed alone as its own graph (the variant "
                          "its family's `auto` picked). Compact layout, f32 logits, bf16 hidden rows. GB/s (shown from 100) "
                          "= each stage's least traffic / path time. FAIL: the path's checker (route against its "
                          "reference, permute's rules, combine bit for bit on the run's own rows) failed."))
    goal = [r for r in records if r.measured and r.params.get("tokens") == 1 and r.pdl == "off"
            and str(r.params.get("model", "")).startswith("DeepSeek-V3")]
    if goal:
        best = min(r.us for r in goal)
        out.append(f"- Goal (issue #15): DeepSeek-V3, T = 1, PDL off, the whole path under {GOAL_US:.0f} µs: "
                   f"{best:.2f} µs, {'met' if best < GOAL_US else 'missed'}.")
    for title, recs in tables(records):
        out += path_table(title, recs)
    return "\n".join(out) + "\n"
