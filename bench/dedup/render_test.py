#!/usr/bin/env python3
"""CPU test of bench/dedup/render.py: crafted results, checked tables (rows, cells, ratios, targets)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from render_test import RenderTest, rec, tables_of  # noqa: E402


class FamilyRenderTest(RenderTest):
    def test_dedup(self):
        rs = []
        for values, title in (("uniform", "M sweep — (a) uniform"), ("realistic", "M sweep — (b) realistic")):
            for m in (1, 2):
                p = {"bs": 115, "M": m, "k": 2048, "values": values}
                rs.append(rec("dedup", title, "fast", p, 5.0 + m))
                rs.append(rec("dedup", title, "hash", p, None, "n/a" if m == 2 else "fail"))
        for values in ("uniform", "realistic"):
            rs.append(rec("dedup", "tuning", "fast 512x4", {"bs": 115, "M": 1, "k": 2048, "values": values,
                                                             "tile": 2048}, 5.25 if values == "uniform" else 5.4))
        t = tables_of(self.render("dedup", rs))
        m = t["M sweep — (a) uniform"]
        self.assertEqual(m, [["variant", "M=1", "M=2"], ["fast", "6.0", "7.0"], ["hash", "wrong", "n/a"]])
        self.assertIn("M sweep — (b) realistic", t)
        tune = t["Tuning (bs=115, k=2048, M = tile/2048)"]
        self.assertEqual(tune, [["tile", "configuration", "(a) uniform", "(b) realistic"],
                                ["2048", "fast 512x4", "5.2", "5.4"]])



if __name__ == "__main__":
    unittest.main()
