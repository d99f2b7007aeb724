#!/usr/bin/env python3
"""One-off converter: the Markdown tables that bench_* printed before they wrote
JSON (docs/bench/<family>.md at commit 2857308) into bench/results/<family>.jsonl,
so that `make render` has results before the next GPU run. Only what the
tables show survives: medians (no min/max), the timing setup the docs state,
and the device line. Records carry "converted_from". Delete once every family
has been re-measured.

    python3 bench/md_to_results.py OLD_DOCS_DIR OUT_DIR
"""
import json
import os
import re
import sys

SOURCE = "docs/bench/{}.md@2857308"


def table_rows(lines, i):
    """Rows (lists of cell text) of the Markdown table starting at lines[i]."""
    head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
    rows = []
    i += 2
    while i < len(lines) and lines[i].startswith("|"):
        rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
        i += 1
    return head, rows, i


def rec(family, bench, table, variant, params, device, timing, cell_us, status="ok", **more):
    r = {"bench": bench, "family": family, "table": table, "variant": variant, "params": params,
         "status": status, "device": device, "build": "unknown", "converted_from": SOURCE.format(family)}
    if cell_us is not None:
        r["timing"] = dict(timing, median_us=cell_us)
    r.update(more)
    return r


def convert_align(text):
    lines = text.splitlines()
    m = re.search(r"Device: (.*?) \((\d+) SMs, (\d+) MiB L2\)", text)
    device = {"name": m.group(1), "cc": "9.0", "sms": int(m.group(2)), "l2_mib": int(m.group(3)),
              "driver": 13000, "runtime": 13000}
    timing = {"samples": 25, "mode": "graph", "iters": 20, "warmup": 5, "cold": False}
    rule = re.search(r"^auto rule: (.*)$", text, re.M).group(1)
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"### E = (\d+), topk = (\d+), (\S+) ids", lines[i])
        if not m:
            i += 1
            continue
        E, topk, ids = int(m.group(1)), int(m.group(2)), "zipf" if m.group(3).startswith("zipf") else "uniform"
        table = f"E={E} topk={topk} {ids}"
        head, rows, i = table_rows(lines, i + 2)
        variants = head[1:head.index("auto picks")]
        for row in rows:
            tokens = int(row[0])
            picks = row[head.index("auto picks")]
            for v, cell in zip(variants, row[1:]):
                params = {"E": E, "topk": topk, "ids": ids, "tokens": tokens, "block_size": 128}
                extra = {"picks": picks, "auto_rule": rule} if v == "auto" else {}
                if cell == "n/a":
                    out.append(rec("align", "bench_align", table, v, params, device, timing, None, "n/a"))
                else:
                    out.append(rec("align", "bench_align", table, v, params, device, timing, float(cell),
                                   extra=extra))
    return out


def convert_dedup(text):
    lines = text.splitlines()
    m = re.search(r"Device: (.*?) \((\d+) SMs, sm_(\d)(\d), L2 (\d+) MiB\), CUDA runtime (\d+), driver (\d+)", text)
    device = {"name": m.group(1), "cc": f"{m.group(3)}.{m.group(4)}", "sms": int(m.group(2)),
              "l2_mib": int(m.group(5)), "runtime": int(m.group(6)), "driver": int(m.group(7))}
    timing = {"samples": 100, "mode": "graph", "iters": 20, "warmup": 10, "cold": False}
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"## (.* — \((a|b)\).*)", lines[i])
        if m:
            title, values = m.group(1), "uniform" if m.group(2) == "a" else "realistic"
            head, rows, i = table_rows(lines, i + 2)
            for row in rows:
                for col, cell in zip(head[1:], row[1:]):
                    key, val = col.split("=")
                    params = {"bs": 115, "M": 2, "k": 2048, "values": values}
                    params[key] = int(val)
                    params = {"bs": params["bs"], "M": params["M"], "k": 2048, "values": values}
                    us = None if cell in ("n/a", "wrong") else float(cell)
                    st = {"n/a": "n/a", "wrong": "fail"}.get(cell, "ok")
                    out.append(rec("dedup", "bench_dedup", title, row[0], params, device, timing, us, st))
            continue
        if lines[i].startswith("## Tuning"):
            while not lines[i].startswith("| tile"):
                i += 1
            head, rows, i = table_rows(lines, i)
            for row in rows:
                tile = int(row[0])
                for values, cell in (("uniform", row[2]), ("realistic", row[3])):
                    params = {"bs": 115, "M": tile // 2048, "k": 2048, "values": values, "tile": tile}
                    out.append(rec("dedup", "bench_dedup", "tuning", row[1], params, device, timing, float(cell)))
            continue
        i += 1
    return out


CELL = re.compile(r"\**([\d.]+) µs · (\d+) GB/s \((\d+)%\)\**( FAIL)?")


def convert_act(text):
    lines = text.splitlines()
    m = re.search(r"Device: (.*?), (\d+) SMs, L2 (\d+) MiB, compute capability (\S+), driver (\d+), runtime (\d+)",
                  text)
    device = {"name": m.group(1), "cc": m.group(4), "sms": int(m.group(2)), "l2_mib": int(m.group(3)),
              "driver": int(m.group(5)), "runtime": int(m.group(6))}
    copy = float(re.search(r"\*\*(\d+) GB/s\*\*", text).group(1))
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"### (.*)", lines[i])
        if not m:
            i += 1
            continue
        title = m.group(1)
        if title == "flat grid configurations":
            dtype, act = "bf16", "silu"
        else:
            dtype, act = [s.strip() for s in title.split(",")[:2]]
        head, rows, i = table_rows(lines, i + 2)
        for row in rows:
            tokens, d = int(row[0]), int(row[1])
            inp = tokens * 2 * d * (4 if dtype == "f32" else 2)
            big = inp * 1.5 > 256e6
            timing = {"samples": 30 if big else 100, "mode": "graph", "iters": 5 if big else 20, "warmup": 10,
                      "cold": False}
            for v, cell in zip(head[2:-1], row[2:-1]):
                cm = CELL.fullmatch(cell)
                params = {"dtype": dtype, "act": act, "tokens": tokens, "d": d}
                us = float(cm.group(1))
                out.append(rec("act-and-mul", "bench_act", title, v, params, device, timing, us,
                               "fail" if cm.group(4) else "ok",
                               derived={"bytes": inp * 1.5, "gbps": float(cm.group(2)), "copy_gbps": copy,
                                        "pct_copy": float(cm.group(3))},
                               extra={"auto_pick": row[-1]}))
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for fam, conv in (("align", convert_align), ("dedup", convert_dedup), ("act-and-mul", convert_act)):
        with open(os.path.join(src, f"{fam}.md"), encoding="utf-8") as f:
            recs = conv(f.read())
        with open(os.path.join(dst, f"{fam}.jsonl"), "w", encoding="utf-8") as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{fam}: {len(recs)} records")


if __name__ == "__main__":
    main()
