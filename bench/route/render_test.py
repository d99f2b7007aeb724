#!/usr/bin/env python3
"""CPU test of bench/route/render.py: crafted results, checked tables and goal lines."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_route(self):
        rs = []
        title = "DeepSeek-V3, PDL off"
        for t, us_regs in ((1, 1.5), (16384, 10.0)):
            p = {"tokens": t, "E": 256, "K": 8, "then_align": "no"}
            gb = 2600.0 if t > 1 else 50.0
            rs.append(rec("route", title, "warp-smem", p, us_regs * 2,
                          gbps=gb / 2, peak_gbps=3000.0, pct_of_peak=gb / 60,
                          extra={"auto_pick": "warp-regs"}))
            rs.append(rec("route", title, "warp-regs", p, us_regs,
                          gbps=gb, peak_gbps=3000.0, pct_of_peak=gb / 30,
                          extra={"auto_pick": "warp-regs"}))
        fp = {"tokens": 16, "E": 256, "K": 8, "then_align": "yes"}
        rs.append(rec("route", "DeepSeek-V3, then align, PDL off", "warp-regs", fp, 3.5,
                      gbps=10.0, extra={"auto_pick": "warp-regs"}))
        md = self.render("route", rs)
        t = tables_of(md)
        every = t[title]
        self.assertEqual(every[0], ["tokens", "warp-smem", "warp-regs", "auto →", "auto vs floors"])
        self.assertEqual(every[1], ["1", "3.00 µs", "**1.50 µs**", "warp-regs", "1.9x launch, 2% of copy"])
        self.assertEqual(every[2][2], "**10.00 µs · 2600 GB/s**")
        self.assertIn("auto reaches 2.60 TB/s at worst (DeepSeek-V3, PDL off, T = 16384); goal 2.5 TB/s: met", md)
        self.assertIn("auto at most 1.50 µs (DeepSeek-V3, PDL off, T = 1); goal under 2.0 µs: met", md)
        self.assertIn("route + align, T <= 64, PDL off: at most 3.50 µs", md)
        self.assertIn("goal under 3.0 µs: missed", md)


if __name__ == "__main__":
    unittest.main()
