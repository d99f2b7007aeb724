#!/usr/bin/env python3
"""CPU test of bench/render.py: a missing results file leaves the doc alone.
Shared pieces of the family renderer tests (bench/<folder>/render_test.py, which
render small crafted results files and check the tables). Run by meson (suite
cpu) or directly."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render  # noqa: E402

DEVICE = {"name": "Test GPU", "cc": "9.0", "sms": 132, "l2_mib": 50, "driver": 13000, "runtime": 12080}


def rec(family, table, variant, params, us=None, status="ok", **more):
    r = {"bench": f"bench_{family}", "family": family, "table": table, "variant": variant, "params": params,
         "status": status, "device": DEVICE, "build": "v1-2-gabc"}
    if us is not None:
        r["timing"] = {"median_us": us, "min_us": us * 0.9, "max_us": us * 1.2, "samples": 25, "mode": "graph",
                       "iters": 20, "warmup": 5, "cold": False, "copies": 4}
    r.update(more)
    return r


def tables_of(md):
    """{heading: [rows as cell lists]} of every Markdown table, keyed by the heading above it."""
    out, heading, rows = {}, None, None
    for line in md.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|"):
            if rows is None:
                rows = out.setdefault(heading, [])
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
        else:
            rows = None
    return out


class RenderTest(unittest.TestCase):
    def render(self, family, records, keep_doc=None):
        with tempfile.TemporaryDirectory() as d:
            res, docs = os.path.join(d, "results"), os.path.join(d, "docs")
            os.makedirs(res)
            os.makedirs(docs)
            if keep_doc is not None:
                with open(os.path.join(docs, f"{family}.md"), "w") as f:
                    f.write(keep_doc)
            if records is not None:
                with open(os.path.join(res, f"{family.replace('-', '_')}.jsonl"), "w") as f:
                    for r in records:
                        f.write(json.dumps(r) + "\n")
            self.assertEqual(render.main([family, "--results", res, "--docs", docs]), 0)
            with open(os.path.join(docs, f"{family}.md")) as f:
                return f.read()

    def test_missing_results_leave_doc(self):
        for family in render.family_renderers():
            self.assertEqual(self.render(family, None, keep_doc="hand-made\n"), "hand-made\n")
            self.assertEqual(self.render(family, [], keep_doc="hand-made\n"), "hand-made\n")

    def test_generic_renderer_without_render_py(self):
        # A folder with no bench/<folder>/render.py (none in the tree by this name) still renders:
        # its doc name with dashes, one table per record table keyed by the first parameter.
        renderers = render.family_renderers(["toy_family"])
        self.assertEqual(list(renderers), ["toy-family"])
        folder, fn = renderers["toy-family"]
        self.assertEqual(folder, "toy_family")
        p = {"rows": 16, "cols": 4096, "pdl": "off"}
        rs = [render.Record(r) for r in [
            rec("toy-family", "bf16, PDL off", "a", p, 3.0, extra={"auto_pick": "b"}),
            rec("toy-family", "bf16, PDL off", "b", p, 2.0, extra={"auto_pick": "b"}),
            rec("toy-family", "bf16, PDL off", "a", dict(p, rows=4096), 9.0, status="fail", extra={"auto_pick": "a"}),
            rec("toy-family", "bf16, PDL off", "b", dict(p, rows=4096), status="n/a", extra={"auto_pick": "a"}),
        ]]
        md = fn(rs)
        self.assertIn("bench/toy_family/bench_toy_family.cpp", md)
        self.assertEqual(tables_of(md)["bf16, PDL off"], [["rows", "a", "b", "auto →"],
                                                         ["16", "3.00 µs", "**2.00 µs**", "b"],
                                                         ["4096", "9.00 µs FAIL", "n/a", "a"]])

    def test_chart_linked_when_drawn(self):
        recs = [rec("x", "t", "v", {"tokens": 1}, us=1.0)]
        text = "# x\n\nDevice: Test GPU.\n\n| a |\n|---|\n| 1 |\n"
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(render.with_chart(text, d, "x_y"), text)  # no chart: unchanged
            open(os.path.join(d, "x_y.svg"), "w").close()
            out = render.with_chart(text, d, "x_y")
            lines = out.splitlines()
            self.assertIn("[x_y.svg](x_y.svg)", lines[4])  # right under the provenance line
            self.assertTrue(out.endswith("![x_y: median time per launch](x_y.svg)\n"))
            self.assertIn("| 1 |", out)
        self.assertTrue(recs)


if __name__ == "__main__":
    unittest.main()
