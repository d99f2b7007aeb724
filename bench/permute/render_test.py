#!/usr/bin/env python3
"""CPU test of bench/permute/render.py: crafted results, checked tables."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_permute(self):
        title = "DeepSeek-V3 (E 256, K 8, H 7168), compact, PDL off"
        p1 = {"tokens": 1, "E": 256, "K": 8, "H": 7168, "layout": "compact"}
        p2 = dict(p1, tokens=4096)
        auto = {"auto_pick": "fused"}
        rs = [
            rec("permute", title, "gather", p1, 7.9, gbps=29.0, extra=auto),
            rec("permute", title, "fused", p1, 4.1, gbps=56.0, extra=auto),
            rec("permute", title, "gather", p2, 320.8, gbps=1650.0, extra={"auto_pick": "gather"}),
            rec("permute", title, "fused", p2, status="n/a", reason="T > 256", extra={"auto_pick": "gather"}),
            rec("permute", "Mixtral (E 8, K 2, H 4096), compact, PDL on", "tma",
                dict(p1, E=8, K=2, H=4096), 3.0, pdl="on", status="fail", reason="row 3 differs"),
        ]
        t = tables_of(self.render("permute", rs))
        self.assertEqual(t[title], [["tokens", "gather", "fused", "auto →"],
                                    ["1", "7.90 µs", "**4.10 µs**", "fused"],
                                    ["4096", "**320.80 µs · 1650 GB/s**", "n/a", "gather"]])
        self.assertEqual(t["Mixtral (E 8, K 2, H 4096), compact, PDL on"][1], ["1", "3.00 µs FAIL", ""])


if __name__ == "__main__":
    unittest.main()
