#!/usr/bin/env python3
"""CPU test of bench/act_and_mul/render.py: crafted results, checked tables (rows, cells, ratios, targets)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_act(self):
        rs = []
        for tokens in (1, 4096, 16384):
            p = {"dtype": "bf16", "act": "silu", "tokens": tokens, "d": 4096}
            gb = 3000.0 if tokens > 1 else 20.0
            for v, us in (("vectorized", 2.0 * tokens), ("flat", 1.0 * tokens)):
                rs.append(rec("act-and-mul", "bf16, silu, d = 4096", v, p, us,
                              gbps=gb / (2 if v == "vectorized" else 1), peak_gbps=3000.0,
                              pct_of_peak=100.0 / (2 if v == "vectorized" else 1),
                              extra={"auto_pick": "flat"}))
        md = self.render("act-and-mul", rs)
        self.assertIn("**3000 GB/s**", md)
        t = tables_of(md)
        every = t["bf16, silu, d = 4096"]
        self.assertEqual(every[0], ["tokens", "d", "vectorized", "flat", "auto →"])
        self.assertEqual(every[1], ["1", "4096", "2.00 µs · 10 GB/s (50%)", "**1.00 µs · 20 GB/s (100%)**", "flat"])
        self.assertEqual(len(every), 4)
        refs = t["Targets and reference points (bf16, silu)"]
        self.assertEqual(refs[1][0], "1 x 4096")
        self.assertEqual(refs[1][-1], "1.85x faster")  # FlashInfer 1.85 µs / auto 1.00 µs
        self.assertEqual(refs[3][-1], "0.98x bandwidth")  # 3.0 / 3.07 TB/s
        self.assertIn("- d = 4096: >= 4096 tokens at least 3.00 TB/s (target 2.9: met); 1 token 1.00 µs "
                      "(target 1.3: met)", md)



if __name__ == "__main__":
    unittest.main()
