#!/usr/bin/env python3
"""CPU test of bench/moe_path/render.py: crafted results, checked tables and the goal line."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_moe_path(self):
        off, on = "DeepSeek-V3, compact, PDL off", "DeepSeek-V3, compact, PDL on"
        p = {"model": "DeepSeek-V3", "tokens": 1}
        stages = {"route": 3.5, "permute": 4.25, "combine": 2.75}
        variants = {"stage_variant.route": "block-rank", "stage_variant.permute": "fused",
                    "stage_variant.combine": "slices"}
        rs = [
            rec("moe-path", off, "stages", p, 10.5, stages=stages, extra=variants),
            rec("moe-path", off, "stages", dict(p, tokens=4096), 400.0, gbps=900.0),
            rec("moe-path", on, "stages", p, 9.0, pdl="on", stages=stages, extra=variants),
        ]
        md = self.render("moe-path", rs)
        t = tables_of(md)
        self.assertEqual(t[off], [["tokens", "variant", "path", "route µs", "permute µs", "combine µs", "stage sum µs"],
                                  ["1", "stages", "10.50 µs", "3.50 (block-rank)", "4.25 (fused)", "2.75 (slices)",
                                   "10.50"],
                                  ["4096", "stages", "400.00 µs · 900 GB/s", "", "", "", ""]])
        # PDL on does not count for the goal, which is PDL off.
        self.assertIn("the whole path under 10 µs: 10.50 µs, missed", md)


if __name__ == "__main__":
    unittest.main()
