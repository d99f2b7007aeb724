"""Tables of docs/bench/route.md from bench/results/route.jsonl (run by bench/render.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render import (best_row, cells_line, copy_bandwidth_lines, header, md_table, ordered, tables,  # noqa: E402
                    time_cell)

NAME = "route"

# Issue #14's goals (H100, same-run measurements).
GOAL_TBS = 2.5        # auto, T >= 16384
GOAL_SMALL_US = 2.0   # auto, T <= 64, E <= 512, PDL off
GOAL_FUSED_US = 3.0   # route + align, T <= 64, PDL off
EMPTY_KERNEL_US = 0.8  # an empty kernel in a CUDA graph (the launch floor)


cell = time_cell  # µs, GB/s from 100, n/a, error, FAIL


def auto_of(cells):
    for c in cells.values():
        pick = c.extra.get("auto_pick")
        if pick:
            return cells.get(pick)
    return None


def route_table(title, recs):
    variants = ordered(r.variant for r in recs)
    rows = {}
    for r in recs:
        rows.setdefault(r.params.get("tokens"), {})[r.variant] = r
    body = []
    for t, cells in rows.items():
        row = best_row([t], cells, variants, cell)
        a = auto_of(cells)
        row.append(a.variant if a is not None else "")
        if a is not None and a.measured:
            floor = f"{a.us / EMPTY_KERNEL_US:.1f}x launch"
            copy = a.pct_of_peak
            if copy is not None and copy >= 1:
                floor += f", {copy:.0f}% of copy"
            row.append(floor)
        else:
            row.append("")
        body.append(row)
    return ["", f"### {title}", "", md_table(["tokens"] + variants + ["auto →", "auto vs floors"],
                                            ["---:"] + ["---"] * (len(variants) + 2), body)]


def render(records):
    out = header("route", records, "bench/route/bench_route.cpp")
    out += copy_bandwidth_lines(records)
    out.append(cells_line(records,
                          ". GB/s (shown from 100) = (logits + bias read once + ids and weights written once) / "
                          "time. Bold: fastest. `auto →`: what `auto` picks; `auto vs floors`: its time over an "
                          f"empty kernel's ({EMPTY_KERNEL_US} µs in a graph) and its bandwidth as % of the copy "
                          "bandwidth. FAIL: output differs from the CPU reference beyond the near-tie tolerance."))

    out += ["", "## Goals (issue #14)", ""]
    big, small, fused = [], [], []
    for title, recs in tables(records):
        by_t = {}
        for r in recs:
            by_t.setdefault(r.params.get("tokens"), {})[r.variant] = r
        for t, cells in by_t.items():
            a = auto_of(cells)
            if a is None or not a.measured:
                continue
            p = a.params
            if p.get("then_align") == "yes":
                if t <= 64:
                    fused.append((title, t, a))
            elif t >= 16384 and a.gbps:
                big.append((title, t, a))
            elif t <= 64 and p.get("E", 0) <= 512 and a.pdl == "off":
                small.append((title, t, a))
    if big:
        worst = min(big, key=lambda x: x[2].gbps)
        out.append(f"- T >= 16384: auto reaches {worst[2].gbps / 1000:.2f} TB/s at worst ({worst[0]}, "
                   f"T = {worst[1]}); goal {GOAL_TBS} TB/s: "
                   f"{'met' if worst[2].gbps / 1000 >= GOAL_TBS else 'missed'} "
                   f"({sum(1 for b in big if b[2].gbps / 1000 >= GOAL_TBS)} of {len(big)} cells)")
    if small:
        worst = max(small, key=lambda x: x[2].us)
        out.append(f"- T <= 64, E <= 512, PDL off: auto at most {worst[2].us:.2f} µs ({worst[0]}, T = {worst[1]}); "
                   f"goal under {GOAL_SMALL_US} µs: {'met' if worst[2].us < GOAL_SMALL_US else 'missed'}")
    if fused:
        worst = max(fused, key=lambda x: x[2].us)
        out.append(f"- route + align, T <= 64, PDL off: at most {worst[2].us:.2f} µs ({worst[0]}, T = {worst[1]}); "
                   f"goal under {GOAL_FUSED_US} µs: {'met' if worst[2].us < GOAL_FUSED_US else 'missed'}")

    out += ["", "## Every variant"]
    for title, recs in tables(records):
        out += route_table(title, recs)
    return "\n".join(out) + "\n"
