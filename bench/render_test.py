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

GPU = {"cc": "9.0", "sms": 132, "l2_mib": 50, "runtime": "12.8"}


def rec(family, table, variant, params, us=None, status="ok", pdl="off", gbps=None, peak_gbps=None,
        pct_of_peak=None, reason="", stages=None, **more):
    """A record as bench::Writer writes it (bench/common/record.hpp; the one record schema): `status`
    ok / fail / n/a / error becomes the check or the error the writer gives it, with `reason`;
    `stages` ({stage: median µs}) becomes stage_us, with their "sum" as the writer adds it."""
    r = {"op": family, "variant": variant, "variant_requested": variant, "params": params,
         "dtype": params.get("dtype"), "device": "Test GPU",
         "check": {"result": "skipped", "max_error": None, "error_unit": None, "first_difference": None},
         "time_us": None, "stage_us": None, "timing_mode": None, "bytes": 0, "gbps": None, "timing": None,
         "peak_gbps": None, "pct_of_peak": None, "outputs": [], "notes": [], "summary": {}, "driver": "13.0",
         "build": "v1-2-gabc", "pdl": pdl, "resources": None, "error": None, "bench": f"bench_{family}",
         "table": table, "gpu": GPU}
    if status in ("ok", "fail"):
        r["check"]["result"] = "pass" if status == "ok" else "fail"
    if status == "fail":
        r["check"]["first_difference"] = reason or "differs from the CPU reference"
    if status == "n/a":
        r["error"] = {"exit_code": 2, "message": f"{family} variant '{variant}' does not apply to this input: {reason}"}
    if status == "error":
        r["error"] = {"exit_code": 3, "message": reason or "error"}
    if stages:
        r["stage_us"] = {s: {"median": v, "min": v, "max": v, "samples": 25} for s, v in stages.items()}
        total = sum(stages.values())
        r["stage_us"]["sum"] = {"median": total, "min": total, "max": total, "samples": 25}
    if us is not None:
        r["time_us"] = {"median": us, "min": us * 0.9, "max": us * 1.2, "samples": 25}
        r["timing"] = {"method": "graph", "cache": "warm", "launches": 20, "warmup": 5, "copies": 4}
        r["timing_mode"] = "graph replay, 20 launches per replay, rotating 4 input copies"
    if gbps is not None:
        r.update(bytes=1.0, gbps=gbps, peak_gbps=peak_gbps, pct_of_peak=pct_of_peak)
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

    def test_record_view(self):
        """Status, time and provenance as render.py reads them from hand-written records of the
        schema (the lines bench/common/record_test.cpp expects the writer to produce)."""
        head = ('{"op":"x","variant":"v","variant_requested":"v","params":{"tokens":16},"dtype":null,'
                '"device":"GPU 9","check":{"result":"%s","max_error":null,"error_unit":null,"first_difference":null},')
        timed = ('"time_us":{"median":2.5,"min":2,"max":4,"samples":25},"stage_us":null,"timing_mode":"t",'
                 '"bytes":7500,"gbps":3,"timing":{"method":"graph","cache":"warm","launches":20,"warmup":5,'
                 '"copies":3},"peak_gbps":3000,"pct_of_peak":0.1,')
        untimed = ('"time_us":null,"stage_us":null,"timing_mode":null,"bytes":0,"gbps":null,"timing":null,'
                   '"peak_gbps":null,"pct_of_peak":null,')
        tail = ('"outputs":[],"notes":[],"summary":{},"driver":"13.0","build":"abc-dirty","pdl":"off",'
                '"resources":null,"error":%s,"bench":"bench_x","table":"t1","gpu":{"cc":"9.0","sms":132,'
                '"l2_mib":50,"runtime":"12.8"}}')
        na = '{"exit_code":2,"message":"x variant \'v\' does not apply to this input: no"}'
        err = '{"exit_code":3,"message":"launch: invalid argument"}'
        lines = {"ok": head % "pass" + timed + tail % "null", "fail": head % "fail" + timed + tail % "null",
                 "n/a": head % "skipped" + untimed + tail % na, "error": head % "skipped" + untimed + tail % err}
        for status, line in lines.items():
            r = render.Record(json.loads(line))
            self.assertEqual(r.status, status)
            self.assertEqual(r.measured, status in ("ok", "fail"))
            self.assertEqual(r.us, 2.5 if status in ("ok", "fail") else None)
            self.assertEqual(r.table, "t1")
        ok = render.Record(json.loads(lines["ok"]))
        self.assertEqual((ok.gbps, ok.peak_gbps, ok.pct_of_peak), (3, 3000, 0.1))
        self.assertEqual(render.provenance([ok], "x", "bench/x/bench_x.cpp"),
                         "Device: GPU 9 (132 SMs, sm_90, L2 50 MiB), CUDA runtime 12.8, driver 13.0. Build "
                         "abc-dirty; measured by `bench_x` (bench/x/bench_x.cpp), 1 cells.")
        self.assertEqual(render.timing_sentence([ok]),
                         "Median µs per launch over 25 CUDA-graph replays of 20 launches each, after 5 warm-up "
                         "launches")

    def test_timing_sentence_many_shapes(self):
        """Up to MAX_TIMING_KINDS timing shapes are listed by count; more (a bench that gives long launches
        fewer samples) become ranges per method with cell counts, hand-computed here."""
        def timed(samples, method="graph", launches=20, warmup=5, cache="warm"):
            r = rec("x", "t", "v", {"tokens": samples}, us=1.0)
            r["time_us"]["samples"] = samples
            r["timing"] = {"method": method, "launches": launches, "warmup": warmup, "cache": cache}
            return render.Record(r)
        few = [timed(100), timed(100), timed(25, launches=3, warmup=2)]
        self.assertEqual(render.timing_sentence(few),
                         "Median µs per launch over 100 CUDA-graph replays of 20 launches each (1 cells: 25 "
                         "CUDA-graph replays of 3 launches each), after 5/2 warm-up launches")
        many = [timed(100), timed(40, launches=7, warmup=9), timed(12, launches=1, warmup=2),
                timed(30, launches=4), timed(26, method="events", warmup=3),
                timed(80, method="events", cache="cold")]
        self.assertEqual(render.timing_sentence(many),
                         "Median µs per launch over 12–100 CUDA-graph replays of 1–20 launches each (4 cells); "
                         "26–80 event-timed launches (2 cells) (L2 flushed before each in 1 cells), after 2–9 "
                         "warm-up launches")

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
