#!/usr/bin/env python3
"""CPU test of bench/experts/render.py: crafted results, checked tables."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_experts(self):
        title = "DeepSeek-V3 TP8 shard (E 256, K 8, H 7168, I 256), PDL off"
        p = {"model": "deepseek-v3-tp8", "tokens": 1, "E": 256, "K": 8, "H": 7168, "I": 256, "layout": "compact"}
        big = dict(p, tokens=16384)
        rs = [
            rec("experts", title, "naive", p, 120.0, extra={"weight_tbps": 0.733, "tflops": 0.7, "auto_pick": "decode"}),
            rec("experts", title, "decode", p, 40.0, extra={"weight_tbps": 2.2, "tflops": 2.2, "auto_pick": "decode"}),
            rec("experts", title, "naive", big, status="n/a",
                reason="skipped by the bench: its launch took over 50 ms at T 1024", extra={"auto_pick": "grouped"}),
            rec("experts", title, "decode", big, status="n/a", reason="T above the decode kernel's limit",
                extra={"auto_pick": "grouped"}),
            rec("experts", title, "grouped", big, 9000.0, status="fail", reason="out[3, 4] = 1",
                extra={"weight_tbps": 0.31, "tflops": 481.6, "auto_pick": "grouped"}),
        ]
        t = tables_of(self.render("experts", rs))
        self.assertEqual(t[title], [["tokens", "naive", "decode", "grouped", "auto →"],
                                    ["1", "120.0 µs · 0.73 TB/s · 1 TFLOP/s", "**40.0 µs · 2.20 TB/s · 2 TFLOP/s**", "",
                                     "decode"],
                                    # a failed cell is never the fastest; the time rule's n/a says "skipped"
                                    ["16384", "skipped", "n/a", "9000.0 µs · 0.31 TB/s · 482 TFLOP/s FAIL", "grouped"]])


if __name__ == "__main__":
    unittest.main()
