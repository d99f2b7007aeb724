#!/usr/bin/env python3
"""CPU test of bench/combine/render.py: crafted results, checked tables."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_combine(self):
        title = "Qwen3 (K 8, H 4096), PDL on"
        p = {"tokens": 16, "K": 8, "H": 4096, "rows": 128}
        rs = [
            rec("combine", title, "gather", p, 3.2, extra={"auto_pick": "slices"}),
            rec("combine", title, "slices", p, 2.5, extra={"auto_pick": "slices"}),
            rec("combine", title, "tma", p, status="error", reason="launch failed", extra={"auto_pick": "slices"}),
            rec("combine", title, "gather", dict(p, tokens=8192), 180.0, gbps=2900.0,
                extra={"auto_pick": "tma"}),
            rec("combine", title, "tma", dict(p, tokens=8192), 150.0, status="fail", reason="out[0] differs",
                gbps=3400.0, extra={"auto_pick": "tma"}),
        ]
        t = tables_of(self.render("combine", rs))
        self.assertEqual(t[title], [["tokens", "gather", "slices", "tma", "auto →"],
                                    ["16", "3.20 µs", "**2.50 µs**", "error", "slices"],
                                    # a failed cell is never the fastest
                                    ["8192", "**180.00 µs · 2900 GB/s**", "", "150.00 µs · 3400 GB/s FAIL", "tma"]])


if __name__ == "__main__":
    unittest.main()
