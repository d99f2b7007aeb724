"""CLI cases of the commands around the kernels: sweeps and --results records,
timings.npy, trace stats, trace import, compare, plot (run by cli_test.py).

Stdlib only: SVGs are parsed with xml.etree, .npy files with the harness's
independent reader.
"""
import base64
import json
import os
import re
import struct
import xml.etree.ElementTree as ET

from cli_harness import SKIP, Fail, case, expect, has_gpu, limited_run, load_npy, run, save_npy, tmp


def one_line_error(p, *words):
    lines = p.stderr.strip().splitlines()
    expect(len(lines) == 1 and lines[0].startswith("moekit: "), f"one error line wanted: {p.stderr!r}")
    for w in words:
        expect(w in lines[0], f"{w!r} not in {lines[0]!r}")


# ---- sweeps, records, timings.npy (every family, through its SMALL_ARGS) ------

FAMILIES = []  # set by cli_test.py: the families' cli_cases modules


@case()
def sweep_of_a_common_option_in_every_family():
    # --iters is numeric, so a list of it sweeps in every family: 2 cells, 2 records each.
    for fam in FAMILIES:
        d = tmp()
        res = os.path.join(d, "r.jsonl")
        args = [fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--bench", "--iters", "2,3", "--format", "json",
                "--results", res]
        p = run(*args, code=0)
        objs = [json.loads(l) for l in p.stdout.splitlines()]
        expect(len(objs) == 2 and all(o["op"] == fam.COMMAND for o in objs), f"{fam.COMMAND}: {p.stdout}")
        with open(res) as f:
            lines = f.read().splitlines()
        expect(len(lines) == 2, f"{fam.COMMAND}: {len(lines)} records")
        for l in lines:
            o = json.loads(l)
            for k in ["device", "driver", "build", "pdl", "timing", "timing_mode", "time_us", "params"]:
                expect(k in o, f"record lacks {k}: {o}")
            expect(o["pdl"] == "n/a" and o["build"] and o["timing"] == {"method": "host", "cache": "warm"}, o)
        run(*args, code=0)  # appends
        with open(res) as f:
            expect(len(f.read().splitlines()) == 4, "a second sweep appends its records")
        # --iters is no parameter: the four records are one cell, the last of each side compared
        p = run("compare", res, res, code=0)
        expect("1 cells: 0 regressed, 0 faster, 1 same" in p.stdout and "6 repeated records" in p.stdout, p.stdout)
        # text: one header line per cell
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "auto,auto", code=0)
        expect(p.stdout.count("== sweep cell") == 2, p.stdout)
        # csv: one table, one header
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "auto,auto", "--format", "csv", code=0)
        rows = p.stdout.strip().splitlines()
        expect(len(rows) == 3 and rows[0].startswith("op,") and rows[1].startswith(fam.COMMAND + ","), p.stdout)


@case()
def pdl_option_in_every_family():
    # --pdl on|off is a common option, registered once; a CPU run launches no
    # kernel, so every report says n/a whatever was asked.
    for fam in FAMILIES:
        base = [fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu"]
        for mode in ("on", "off"):
            o = json.loads(run(*base, "--pdl", mode, "--format", "json", code=0).stdout)
            expect(o["pdl"] == "n/a" and "pdl" not in o["params"], f"{fam.COMMAND} --pdl {mode}: {o}")
            p = run(*base, "--pdl", mode, code=0)
            expect(p.stdout.splitlines()[0].endswith(", pdl=n/a"), f"{fam.COMMAND}: {p.stdout}")
            head, row = run(*base, "--pdl", mode, "--format", "csv", code=0).stdout.strip().splitlines()
            cols = dict(zip(head.split(","), row.split(",")))
            expect(cols.get("pdl") == "n/a", f"{fam.COMMAND}: {head} / {row}")
        o = json.loads(run(*base, "--format", "json", code=0).stdout)  # the default
        expect(o["pdl"] == "n/a", o)
        p = run(*base, "--pdl", "maybe", code=2)
        one_line_error(p, "--pdl")
        help_text = run(fam.COMMAND, "--help", code=0).stdout
        expect(help_text.count("--pdl") == 1, f"{fam.COMMAND}: --pdl registered once: {help_text}")
        # a list sweeps: one cell per mode
        p = run(*base, "--pdl", "on,off", "--format", "json", code=0)
        objs = [json.loads(l) for l in p.stdout.splitlines()]
        expect(len(objs) == 2 and all(o["pdl"] == "n/a" for o in objs), f"{fam.COMMAND}: {p.stdout}")
        p = run(*base, "--pdl", "off,on", code=0)
        expect("== sweep cell 1/2: pdl=off" in p.stdout and "== sweep cell 2/2: pdl=on" in p.stdout, p.stdout)


@case("gpu")
def pdl_on_and_off_on_the_gpu():
    # On a GPU the report says what the launch did: off with --pdl off; with
    # --pdl on (the default), on where the device has PDL (sm_90+).
    if not has_gpu():
        return SKIP
    for fam in FAMILIES:
        seen = {}
        for mode in ("on", "off", None):
            args = [fam.COMMAND, *fam.SMALL_ARGS, "--device", "gpu", "--bench", "--iters", 5, "--format", "json"]
            if mode:
                args += ["--pdl", mode]
            o = json.loads(run(*args, code=0).stdout)
            expect(o["check"]["result"] == "pass" and o["pdl"] in ("on", "off"), f"{fam.COMMAND} {mode}: {o}")
            seen[mode] = o["pdl"]
        expect(seen["off"] == "off" and seen[None] == seen["on"], f"{fam.COMMAND}: {seen}")


@case()
def sweep_errors():
    fam = FAMILIES[0]
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--iters", "1,,2", code=2)
    one_line_error(p, "--iters", "empty item")
    # a cell that fails is reported, the others run, the exit code is the failure's
    d = tmp()
    res = os.path.join(d, "r.jsonl")
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "no-such,auto", "--format", "json",
            "--results", res, code=2)
    objs = [json.loads(l) for l in p.stdout.splitlines()]
    expect(len(objs) == 2 and objs[0]["error"]["exit_code"] == 2 and objs[1]["error"] is None, p.stdout)
    expect("variant=no-such" in p.stderr, p.stderr)
    with open(res) as f:
        expect(len(f.read().splitlines()) == 1, "only the completed cell is recorded")
    # --results must be a regular file
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--results", d, code=2)
    one_line_error(p, "regular file")


def with_option(opt):
    """The first family whose SMALL_ARGS give `opt` a value, and a function
    making its command line with that value replaced (issue 31's sweep cases
    hold for every family, so none is named here)."""
    for fam in FAMILIES:
        args = list(fam.SMALL_ARGS)
        if opt in args:
            i = args.index(opt) + 1

            def line(value, attached=False, fam=fam, args=args, i=i):
                a = list(args)
                if attached:
                    a[i - 1:i + 1] = [f"{opt}{value}"]
                else:
                    a[i] = value
                return [fam.COMMAND, *a, "--device", "cpu"]
            return fam, args[i], line
    raise Fail(f"no family's SMALL_ARGS has {opt}")


@case()
def sweep_item_the_option_refuses_is_a_failing_cell():
    # issue 31: `--tokens 1,x` stopped the whole sweep without naming the cell.
    # Now the cell tokens=x fails like a single run (a stderr line naming it, a
    # JSON error object) and the cells around it still run.
    fam, n, line = with_option("--tokens")
    d = tmp()
    res = os.path.join(d, "r.jsonl")
    p = run(*line(f"{n},x,{n + 1}"), "--format", "json", "--results", res, code=2)
    objs = [json.loads(l) for l in p.stdout.splitlines()]
    expect(len(objs) == 3, p.stdout)
    expect(objs[0]["error"] is None and objs[0]["params"]["tokens"] == n, objs[0])
    expect(objs[1]["error"]["exit_code"] == 2 and "x" in objs[1]["error"]["message"], objs[1])
    expect(objs[2]["error"] is None and objs[2]["params"]["tokens"] == n + 1, objs[2])
    one_line_error(p, "--tokens", "(tokens=x)")
    with open(res) as f:
        expect(len(f.read().splitlines()) == 2, "the two good cells are recorded")
    # text: every cell has its header, the failing one its stderr line
    p = run(*line(f"{n},x"), code=2)
    expect(p.stdout.count("== sweep cell") == 2 and f"{fam.COMMAND} [" in p.stdout, p.stdout)
    # a command line no cell can run (an unknown option) is refused once, before anything runs
    p = run(*line(f"{n},{n + 1}"), "--no-such-option", "--format", "json", code=2)
    expect(p.stdout == "", p.stdout)
    one_line_error(p, "--no-such-option")


@case()
def sweep_short_option_with_attached_list():
    # -E8,16 is -E 8,16 (CLI11 reads -E8 as -E 8): a sweep of two cells.
    fam, e, line = with_option("-E")
    for cmd in (line(f"{e},{2 * e}", attached=True), line(f"{e},{2 * e}")):
        p = run(*cmd, "--format", "json", code=0)
        objs = [json.loads(l) for l in p.stdout.splitlines()]
        expect(len(objs) == 2 and all(o["error"] is None for o in objs), f"{cmd}: {p.stdout}")
        expect(objs[0]["params"] != objs[1]["params"], f"{cmd}: one E for both cells: {p.stdout}")
    p = run(*line(f"{e},{2 * e}", attached=True), code=0)
    expect(f"== sweep cell 2/2: E={2 * e}" in p.stdout, p.stdout)


@case()
def sweep_error_objects_and_report_types():
    # An error object has null where nothing is known (params, variant, dtype,
    # device), never {} or "" (README "Reports").
    fam = FAMILIES[0]
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "no-such,auto", "--format", "json", code=2)
    err = json.loads(p.stdout.splitlines()[0])
    for k in ("params", "variant", "dtype", "device"):
        expect(err[k] is None, f"{k}: {err}")
    expect(err["variant_requested"] == "no-such" and err["build"], err)
    p = run(*with_option("--tokens")[2]("1,x"), "--format", "json", code=2)
    err = json.loads(p.stdout.splitlines()[1])
    for k in ("params", "variant", "variant_requested", "dtype", "device"):
        expect(err[k] is None, f"{k}: {err}")
    # a CPU --bench moves no measured traffic: gbps (and the copy bandwidth) are null, not 0
    for fam in FAMILIES:
        o = json.loads(run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--bench", "--iters", 2, "--format",
                           "json", code=0).stdout)
        expect(o["gbps"] is None and o["peak_gbps"] is None and o["pct_of_peak"] is None, f"{fam.COMMAND}: {o}")
        head, row = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--bench", "--iters", 2, "--format", "csv",
                        code=0).stdout.strip().splitlines()[:2]
        cols = dict(zip(head.split(","), row.split(",")))
        expect(cols["gbps"] == "", f"{fam.COMMAND}: {head} / {row}")


@case()
def sweep_of_variants_without_a_gpu_keeps_them_apart():
    # issue 31: on the CPU a --variant sweep ran "reference" in every cell; its
    # records collapsed into one cell in compare and one line in plot, silently.
    # The records keep the requested variant (variant_requested), compare and
    # plot tell the cells apart by it, and all three say so.
    if has_gpu():
        return SKIP
    fam, n, line = with_option("--tokens")
    names = []  # two variants that apply to the family's small input
    for l in run("variants", fam.COMMAND, "--format", "json", code=0).stdout.splitlines():
        v = json.loads(l)["variant"]
        if len(names) < 2 and run(*line(n), "--variant", v).returncode == 0:
            names.append(v)
    expect(len(names) == 2, f"{fam.COMMAND}: {names}")
    d = tmp()
    res = os.path.join(d, "r.jsonl")
    p = run(*line(f"{n},{n + 1}"), "--variant", ",".join(["auto"] + names), "--bench", "--iters", 2,
            "--results", res, code=0)
    expect("all ran 'reference'" in p.stderr and "variant_requested" in p.stderr, p.stderr)
    expect(len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run("compare", res, res, code=0)
    expect("6 cells:" in p.stdout and "repeated" not in p.stdout, p.stdout)
    for v in ["auto"] + names:
        expect(f"reference (from {v})" in p.stdout, p.stdout)
    expect("note: 3 requested variants ran 'reference'" in p.stdout, p.stdout)
    o = json.loads(run("compare", res, res, "--format", "json", code=0).stdout)
    expect(sorted({c["variant_requested"] for c in o["cells"]}) == sorted(["auto"] + names), o)
    svg = os.path.join(d, "c.svg")
    p = run("plot", res, "-o", svg, code=0)
    expect("note: 3 requested variants ran 'reference'" in p.stdout, p.stdout)
    series = ET.parse(svg).getroot().findall(f".//{SVG}polyline[@class='series']")
    expect(sorted(s.get("data-variant") for s in series) == sorted(f"reference (from {v})" for v in ["auto"] + names),
           [s.get("data-variant") for s in series])
    # a bench record (no variant_requested) or a record that ran what it asked for keeps its plain name
    write_jsonl(res, [record("a", 16, 1.0), dict(record("b", 16, 1.0), variant_requested="b")])
    p = run("compare", res, res, code=0)
    expect("(from" not in p.stdout and "note:" not in p.stdout, p.stdout)


@case()
def timings_npy_holds_the_samples():
    for fam in FAMILIES:
        d = tmp()
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--bench", "--iters", 5, "--out", d, "--format",
                "json", code=0)
        o = json.loads(p.stdout)
        hdr, t = load_npy(os.path.join(d, "timings.npy"))
        expect(hdr["descr"] == "<f8" and hdr["shape"] == (o["time_us"]["samples"],), f"{hdr} vs {o['time_us']}")
        expect(abs(min(t) - o["time_us"]["min"]) <= 1e-5 * min(t) + 1e-3, f"{t} {o['time_us']}")
        expect(o["timing_mode"] and o["timing"]["method"] == "host", o)
        expect(os.path.join(d, "timings.npy") in o["outputs"], o["outputs"])
        # the written outputs are still validated (timings.npy is not one of the job's files)
        expect(o["check"]["result"] == "pass", f"{fam.COMMAND}: {o['check']}")
        d2 = tmp()
        run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--out", d2, code=0)
        expect(not os.path.exists(os.path.join(d2, "timings.npy")), "timings.npy without --bench")


# ---- trace stats ---------------------------------------------------------------

@case()
def trace_stats_counts():
    d = tmp()
    f = os.path.join(d, "t.npy")
    ids = [0, 1, 1, 1, 2, 9, -1, 3, 1, 2]  # 5 tokens x top-2, E = 4: one negative, one >= E, one repeated row
    save_npy(f, "<i4", (5, 2), ids)
    o = json.loads(run("trace", "stats", f, "-E", 4, "--format", "json", code=0).stdout)
    expect(o["tokens"] == 5 and o["topk"] == 2 and o["num_experts"] == 4, o)
    expect(o["counts"] == [1, 4, 2, 1], o["counts"])
    expect(o["invalid"] == {"total": 2, "negative": 1, "too_large": 1}, o["invalid"])
    expect(o["repeated_rows"] == 1, o)
    expect(o["load"]["max"] == 4 and abs(o["load"]["mean"] - 2.0) < 1e-9 and abs(o["load"]["max_over_mean"] - 2) < 1e-9,
           o["load"])
    expect(o["hottest"][:2] == [{"expert": 1, "count": 4}, {"expert": 2, "count": 2}], o["hottest"])
    t = run("trace", "stats", f, "-E", 4, code=0).stdout
    expect("5 tokens x top-2" in t and "invalid 2" in t and "max/mean 2.00" in t, t)
    save_npy(f, "<i8", (5, 2), ids)
    o = json.loads(run("trace", "stats", f, "-E", 4, "--format", "json", code=0).stdout)
    expect(o["counts"] == [1, 4, 2, 1], "int64 input")


@case()
def trace_stats_bad_inputs():
    d = tmp()
    f = os.path.join(d, "t.npy")
    save_npy(f, "<f4", (2, 2), [0.0, 1.0, 2.0, 3.0])
    one_line_error(run("trace", "stats", f, "-E", 4, code=2), f, "int32")
    save_npy(f, "<i4", (4,), [0, 1, 2, 3])
    one_line_error(run("trace", "stats", f, "-E", 4, code=2), f, "2-D")
    one_line_error(run("trace", "stats", os.path.join(d, "missing.npy"), "-E", 4, code=2), "missing.npy")
    run("trace", "stats", f, code=2)  # -E is required


# ---- trace import ----------------------------------------------------------------

def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def layers_of(d):
    out = {}
    for n in sorted(os.listdir(d)):
        hdr, v = load_npy(os.path.join(d, n))
        expect(hdr["descr"] == "<i4" and len(hdr["shape"]) == 2, f"{n}: {hdr}")
        k = hdr["shape"][1]
        out[n] = [v[i:i + k] for i in range(0, len(v), k)]
    return out


@case()
def trace_import_json():
    d = tmp()
    one = os.path.join(d, "one.json")  # one request: 3 tokens x 2 layers x top-2
    write(one, json.dumps([[[1, 2], [3, 4]], [[5, 6], [7, 0]], [[1, 3], [2, 4]]]))
    run("trace", "import", "json", one, "-o", os.path.join(d, "o1"), code=0)
    expect(layers_of(os.path.join(d, "o1")) == {"layer0.npy": [[1, 2], [5, 6], [1, 3]],
                                                "layer1.npy": [[3, 4], [7, 0], [2, 4]]}, "one request")
    # a list of requests, a vLLM-style response (prompt first, then the completion) and JSON lines
    many = os.path.join(d, "many.json")
    write(many, json.dumps([[[[1, 2]]], [[[3, 4]], [[5, 6]]]]))
    resp = os.path.join(d, "resp.json")
    write(resp, json.dumps({"id": "x", "prompt_routed_experts": [[[7, 8]]],
                            "choices": [{"text": "hi", "routed_experts": [[[9, 10]]]}]}))
    lines = os.path.join(d, "lines.jsonl")
    write(lines, json.dumps([[[11, 12]]]) + "\n\n" + json.dumps({"routed_experts": [[[13, 14]]]}) + "\n")
    run("trace", "import", "json", many, resp, lines, "-o", os.path.join(d, "o2"), code=0)
    expect(layers_of(os.path.join(d, "o2")) == {"layer0.npy": [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12],
                                                               [13, 14]]}, "requests concatenated in order")
    # SGLang: base64 of int32 [tokens, layers, topk], shaped by --layers/--topk
    sg = os.path.join(d, "sg.json")
    vals = list(range(12))  # 2 tokens x 3 layers x top-2
    write(sg, json.dumps({"meta_info": {"routed_experts": base64.b64encode(struct.pack("<12i", *vals)).decode()}}))
    one_line_error(run("trace", "import", "json", sg, "-o", os.path.join(d, "o3"), code=2), "--layers")
    run("trace", "import", "json", sg, "-o", os.path.join(d, "o3"), "--layers", 3, "--topk", 2, code=0)
    expect(layers_of(os.path.join(d, "o3"))["layer1.npy"] == [[2, 3], [8, 9]], "base64 layout")


@case()
def trace_import_json_errors():
    d = tmp()
    out = os.path.join(d, "o")
    rag = os.path.join(d, "rag.json")
    write(rag, json.dumps([[[1, 2], [3, 4]], [[5, 6], [7]]]))
    one_line_error(run("trace", "import", "json", rag, "-o", out, code=2), rag, "token 1, layer 1", "ragged")
    rag2 = os.path.join(d, "rag2.jsonl")  # the second line has one layer too few
    write(rag2, json.dumps([[[1, 2], [3, 4]]]) + "\n" + json.dumps([[[1, 2]]]) + "\n")
    one_line_error(run("trace", "import", "json", rag2, "-o", out, code=2), rag2 + ":2", "ragged")
    rng = os.path.join(d, "rng.json")
    write(rng, json.dumps([[[1, 2]], [[3, 64]]]))
    run("trace", "import", "json", rng, "-o", out, "-E", 65, code=0)
    one_line_error(run("trace", "import", "json", rng, "-o", os.path.join(d, "o2"), "-E", 64, code=2), rng,
                   "expert id 64", "[0, 64)")
    syn = os.path.join(d, "syn.json")
    write(syn, "[[[1, 2]],\n [[3, x]]]\n")
    one_line_error(run("trace", "import", "json", syn, "-o", os.path.join(d, "o3"), code=2), syn + ":2")
    none = os.path.join(d, "none.json")
    write(none, json.dumps({"text": "no routing here"}))
    one_line_error(run("trace", "import", "json", none, "-o", os.path.join(d, "o4"), code=2), "no routed experts")
    for o in ["o2", "o3", "o4"]:
        expect(not os.path.exists(os.path.join(d, o)) or not os.listdir(os.path.join(d, o)), f"{o} written on error")


@case()
def trace_import_ids_out_of_range_and_library_errors():
    # Ids >= 2^63 are unsigned to the JSON library: they were stored wrapped
    # (2^64 - 1 as -1, exit 0). Every refusal names FILE:LINE and the problem,
    # never the library's "[json.exception...]" tag.
    d = tmp()
    n = [0]

    def refused(fmt, text, *words):
        n[0] += 1
        f = os.path.join(d, f"in{n[0]}.{fmt}")
        write(f, text)
        out = os.path.join(d, f"o{n[0]}")
        p = run("trace", "import", fmt, f, "-o", out, code=2)
        one_line_error(p, *[w.replace("FILE", f) for w in words])
        expect("json.exception" not in p.stderr, p.stderr)
        expect(not os.path.exists(out), f"{out} written on error")

    for big in (2**64 - 1, 2**63):
        refused("json", f"[[[1, {big}]]]\n", "FILE:1:", f"expert id {big} does not fit int32")
        refused("json", f"[[[1, 2]]]\n[[[1, {big}]]]\n", "FILE:2:", f"expert id {big} does not fit int32")
        refused("jsonl", f'{{"layer": 0, "experts": [1, {big}]}}\n', "FILE:1:", f"expert id {big} does not fit int32")
        refused("jsonl", f'{{"layer": {big}, "experts": [1, 2]}}\n', "FILE:1:", f"layer {big} is outside")
        refused("csv", f'layer,experts\n0,"[1, {big}]"\n', "FILE:2:", f"{big} is out of range")
    refused("json", "[[[1, 2]]]\n[[[1, 1e400]]]\n", "FILE:2:", "number overflow", "1e400")
    refused("json", "[\n [[1, 2]],\n [[3, 1e400]]\n]\n", "FILE:3:", "number overflow", "1e400")
    refused("jsonl", '{"layer": 0, "experts": [1, 1e999]}\n', "FILE:1:", "number overflow")
    # a non-integer id says so, where it stands
    refused("json", '[[["3", 2]]]\n', "FILE:1:", "token 0, layer 0", '"3", not an integer')
    refused("json", "[[[1.5, 2]]]\n", "FILE:1:", "1.5, not an integer")
    # the records reader of compare and plot too
    rec = os.path.join(d, "r.jsonl")
    write(rec, '{"op": "demo", "variant": "x", "params": {"tokens": 1e400}}\n')
    for p in (run("compare", rec, rec, code=2), run("plot", rec, "-o", os.path.join(d, "p.svg"), code=2)):
        one_line_error(p, rec + ":1:", "number overflow")
        expect("json.exception" not in p.stderr, p.stderr)


@case()
def trace_import_csv_with_a_byte_order_mark():
    # Excel's "CSV UTF-8" starts with EF BB BF: the first column is still "layer".
    d = tmp()
    f = os.path.join(d, "bom.csv")
    with open(f, "wb") as fh:
        fh.write(b'\xef\xbb\xbflayer,experts\n0,"[1, 2]"\n1,[3 4]\n')
    run("trace", "import", "csv", f, "-o", os.path.join(d, "o"), code=0)
    expect(layers_of(os.path.join(d, "o")) == {"layer0.npy": [[1, 2]], "layer1.npy": [[3, 4]]}, "BOM csv")


@case()
def trace_import_jsonl_and_csv():
    d = tmp()
    jl = os.path.join(d, "r.jsonl")
    write(jl, '{"layer": 0, "experts": [1, 2]}\n{"layer": 3, "experts": [[3, 4], [5, 6]]}\n'
              '{"layer": 0, "experts": [7, 8]}\n')
    run("trace", "import", "jsonl", jl, "-o", os.path.join(d, "o1"), code=0)
    expect(layers_of(os.path.join(d, "o1")) == {"layer0.npy": [[1, 2], [7, 8]], "layer3.npy": [[3, 4], [5, 6]]},
           "jsonl")
    jl2 = os.path.join(d, "r2.jsonl")
    write(jl2, '{"L": 1, "ids": [1, 2, 3]}\n')
    run("trace", "import", "jsonl", jl2, "-o", os.path.join(d, "o2"), "--layer-field", "L", "--experts-field", "ids",
        code=0)
    expect(layers_of(os.path.join(d, "o2")) == {"layer1.npy": [[1, 2, 3]]}, "field names")
    one_line_error(run("trace", "import", "jsonl", jl2, "-o", os.path.join(d, "o3"), code=2), jl2 + ":1", '"layer"')
    bad = os.path.join(d, "bad.jsonl")
    write(bad, '{"layer": 0, "experts": [1, 2]}\n{"layer": 0, "experts": [1, 2, 3]}\n')
    one_line_error(run("trace", "import", "jsonl", bad, "-o", os.path.join(d, "o3"), code=2), bad + ":2", "ragged")

    csv = os.path.join(d, "r.csv")
    write(csv, 'token,layer,experts\n0,0,"[3, 17]"\n0,1,[4, 5]\n1,0,[1 2]\n')
    run("trace", "import", "csv", csv, "-o", os.path.join(d, "o4"), code=0)
    expect(layers_of(os.path.join(d, "o4")) == {"layer0.npy": [[3, 17], [1, 2]], "layer1.npy": [[4, 5]]}, "csv")
    bad = os.path.join(d, "bad.csv")
    write(bad, 'layer,experts\n0,"[1, 2]"\n0,"[1, 2, 3]"\n')
    one_line_error(run("trace", "import", "csv", bad, "-o", os.path.join(d, "o5"), code=2), bad + ":3", "ragged")
    write(bad, 'layer,experts\n0,"[1, 2]"\n1,"[1, 99]"\n')
    one_line_error(run("trace", "import", "csv", bad, "-o", os.path.join(d, "o5"), "-E", 64, code=2), bad + ":3",
                   "expert id 99")
    write(bad, 'layer,experts\n0,"[1, x]"\n')
    one_line_error(run("trace", "import", "csv", bad, "-o", os.path.join(d, "o5"), code=2), bad + ":2", "'x'")
    write(bad, 'tok,experts\n0,"[1, 2]"\n')
    one_line_error(run("trace", "import", "csv", bad, "-o", os.path.join(d, "o5"), code=2), bad + ":1", '"layer"')
    expect(not os.path.exists(os.path.join(d, "o5")) or not os.listdir(os.path.join(d, "o5")), "o5 written on error")
    run("trace", "import", "xml", csv, "-o", os.path.join(d, "o6"), code=2)


# ---- compare ---------------------------------------------------------------------

def record(variant, tokens, median, spread=0.02, op="demo", device="H100"):
    return {"op": op, "variant": variant, "params": {"tokens": tokens, "E": 64}, "device": device,
            "time_us": {"median": median, "min": median * (1 - spread), "max": median * (1 + spread), "samples": 10},
            "gbps": 1000.0 / median, "error": None}


def write_jsonl(path, recs):
    write(path, "".join(json.dumps(r) + "\n" for r in recs))


def compare(d, base, new, *extra, code):
    b, n = os.path.join(d, "base.jsonl"), os.path.join(d, "new.jsonl")
    write_jsonl(b, base)
    write_jsonl(n, new)
    return run("compare", b, n, *extra, code=code)


@case()
def compare_verdicts():
    d = tmp()
    base = [record("a", 16, 10.0), record("a", 256, 20.0), record("b", 16, 5.0)]
    p = compare(d, base, base, code=0)  # identical files pass
    expect("3 cells: 0 regressed" in p.stdout, p.stdout)
    # a 2x slowdown of one cell fails
    slow = [record("a", 16, 20.0)] + base[1:]
    p = compare(d, base, slow, code=1)
    expect("REGRESSED" in p.stdout and "1 regressed" in p.stdout, p.stdout)
    o = json.loads(compare(d, base, slow, "--format", "json", code=1).stdout)
    bad = [c for c in o["cells"] if c["verdict"] == "regressed"]
    expect(len(bad) == 1 and bad[0]["variant"] == "a" and bad[0]["params"]["tokens"] == 16 and
           abs(bad[0]["ratio"] - 2) < 1e-9, o)
    # noise: 8% slower, but inside the base run's own min..max spread (10%)
    noisy_base = [record("a", 16, 10.0, spread=0.10)]
    compare(d, noisy_base, [record("a", 16, 10.8, spread=0.10)], code=0)
    # 8% slower, spreads apart: a regression at the 5% threshold, not at 10%
    compare(d, [record("a", 16, 10.0, spread=0.01)], [record("a", 16, 10.8, spread=0.01)], code=1)
    compare(d, [record("a", 16, 10.0, spread=0.01)], [record("a", 16, 10.8, spread=0.01)], "--threshold", "0.1",
            code=0)
    # 2x faster passes, reported as faster
    p = compare(d, base, [record("a", 16, 5.0)] + base[1:], code=0)
    expect("faster" in p.stdout, p.stdout)


@case()
def compare_lists_one_sided_cells():
    d = tmp()
    base = [record("a", 16, 10.0), record("gone", 16, 10.0)]
    new = [record("a", 16, 10.0), record("added", 16, 10.0), record("a", 16, 10.0, device="B200")]
    p = compare(d, base, new, code=0)
    expect("only-base" in p.stdout and "gone" in p.stdout and "only-new" in p.stdout and "added" in p.stdout, p.stdout)
    expect("1 only in base, 2 only in new" in p.stdout, p.stdout)
    o = json.loads(compare(d, base, new, "--format", "json", code=0).stdout)
    expect(o["summary"]["only_base"] == 1 and o["summary"]["only_new"] == 2 and o["summary"]["same"] == 1, o)
    expect(len(o["cells"]) == 4, o)
    # untimed records (a failed run) are listed, never a regression
    failed = dict(record("a", 16, 10.0), time_us=None, error={"exit_code": 2, "message": "x"})
    o = json.loads(compare(d, base[:1], [failed], "--format", "json", code=0).stdout)
    expect(o["cells"][0]["verdict"] == "untimed", o)


@case()
def compare_bad_files():
    d = tmp()
    b, n = os.path.join(d, "b.jsonl"), os.path.join(d, "n.jsonl")
    write_jsonl(b, [record("a", 16, 10.0)])
    write(n, json.dumps(record("a", 16, 10.0)) + "\n{not json\n")
    one_line_error(run("compare", b, n, code=2), n + ":2")
    write(n, json.dumps({"hello": 1}) + "\n")
    one_line_error(run("compare", b, n, code=2), n + ":1", "op")
    bad_time = record("a", 16, 10.0)
    bad_time["time_us"]["min"] = 20.0
    write_jsonl(n, [bad_time])
    one_line_error(run("compare", b, n, code=2), n + ":1", "min")
    one_line_error(run("compare", b, os.path.join(d, "missing.jsonl"), code=2), "missing.jsonl")
    run("compare", b, b, "--threshold", "-1", code=2)


@case()
def compare_shows_the_parameters_that_differ():
    # issue 31: every parameter of every cell was in its row (~190 characters).
    # The table has a column per parameter that differs between cells; those
    # every cell shares are listed once; --columns picks them.
    d = tmp()
    recs = []
    for t in (16, 256):
        for v in ("a", "b"):
            r = record(v, t, 10.0)
            r["params"].update(topk=8, block_size=64, max_num_tokens_padded=4096 + t, invalid="bucket",
                               map_semantics="sglang", expert_map=None, dtype_of_ids="int32")
            recs.append(r)
    p = compare(d, recs, recs, code=0)
    lines = p.stdout.splitlines()
    expect(all(len(l) <= 110 for l in lines[1:]), "\n".join(lines))  # it was ~190 (line 0 names the files)
    head = next(l for l in lines if "verdict" in l).split()
    expect(head[:3] == ["variant", "max_num_tokens_padded", "tokens"], head)
    at = next(i for i, l in enumerate(lines) if l.startswith("every cell: "))
    expect(lines[at + 1].startswith(" " * 11 + " "), lines)  # longer than 100 columns: wrapped, indented
    shared = " ".join(lines[at:at + 2])
    for kv in ("op=demo", "device=H100", "E=64", "topk=8", "block_size=64", "invalid=bucket", "expert_map=null"):
        expect(kv in shared.split(), f"{kv} not in {shared!r}")
    rows = [l.split() for l in lines if l.startswith(("a ", "b "))]
    expect(sorted((r[0], r[2]) for r in rows) == [("a", "16"), ("a", "256"), ("b", "16"), ("b", "256")], rows)
    p = compare(d, recs, recs, "--columns", "E,tokens", code=0)
    head = next(l for l in p.stdout.splitlines() if "verdict" in l).split()
    expect(head[:3] == ["variant", "E", "tokens"], head)
    p = compare(d, recs, recs, "--columns", "all", code=0)
    head = next(l for l in p.stdout.splitlines() if "verdict" in l).split()
    expect("dtype_of_ids" in head and "invalid" in head and "E" in head, head)
    one_line_error(compare(d, recs, recs, "--columns", "nosuch", code=2), "--columns", "nosuch", "tokens")


@case()
def compare_and_plot_read_escaped_bytes():
    # A path holding a byte that is not UTF-8 is written as a lone \udcXX
    # (surrogateescape, README); compare and plot read moekit's own records.
    d = tmp()
    weird = os.path.join(d, os.fsdecode(b"out\xff"))
    res = os.path.join(d, "r.jsonl")
    fam, n, line = with_option("--tokens")
    run(*line(f"{n},{n + 1}"), "--bench", "--iters", 2, "--out", weird, "--results", res, code=0)
    with open(res, "rb") as f:
        expect(b"\\udcff" in f.read(), "the record holds the escaped byte")
    p = run("compare", res, res, code=0)
    expect("2 cells: 0 regressed" in p.stdout, p.stdout)
    run("plot", res, "-o", os.path.join(d, "c.svg"), code=0)
    # In the fields compare uses, the escape is the byte again: shown \xff in
    # text, \udcff again in JSON; a real surrogate pair is a character.
    r = record("v\udcff", 16, 1.0, device="G\ud83d\ude00")
    r["params"]["name"] = "x\udc80"
    raw = json.dumps(r)
    expect("\\udcff" in raw and "\\ud83d\\ude00" in raw, raw)
    write(res, raw + "\n")
    p = run("compare", res, res, code=0)
    expect("v\\xff" in p.stdout and "name=x\\x80" in p.stdout and "G\U0001F600" in p.stdout, p.stdout)
    o = json.loads(run("compare", res, res, "--format", "json", code=0).stdout)
    c = o["cells"][0]
    expect(c["variant"] == "v\udcff" and c["params"]["name"] == "x\udc80" and c["device"] == "G\U0001F600", c)


@case()
def compare_refuses_nan_thresholds_and_empty_files():
    # --threshold nan passed CLI11's Range (NaN compares false to both bounds)
    # and made a 10x regression exit 0; an empty baseline exited 0 as success.
    d = tmp()
    b, n = os.path.join(d, "b.jsonl"), os.path.join(d, "n.jsonl")
    write_jsonl(b, [record("a", 16, 10.0)])
    write_jsonl(n, [record("a", 16, 100.0)])
    run("compare", b, n, code=1)  # the regression the checks below must not hide
    for t in ("nan", "NaN", "inf", "-inf", "1e999"):
        one_line_error(run("compare", b, n, "--threshold", t, code=2), "--threshold")
    for empty in ("", "\n  \n"):
        e = os.path.join(d, "e.jsonl")
        write(e, empty)
        one_line_error(run("compare", e, n, code=2), e, "no records", "baseline")
        one_line_error(run("compare", b, e, code=2), e, "no records")


@case()
def records_with_an_impossible_sample_count():
    # "samples": 1e300 was cast to int (undefined behaviour; found by fuzz_readers).
    d = tmp()
    f = os.path.join(d, "r.jsonl")
    for bad in ("1e300", "-1", "2.5", "2147483648"):
        r = record("a", 16, 10.0)
        write(f, json.dumps(r).replace('"samples": ' + json.dumps(r["time_us"]["samples"]), '"samples": ' + bad) + "\n")
        expect(bad in open(f).read(), "the record was not changed")
        one_line_error(run("compare", f, f, code=2), f + ":1", "samples")
    write_jsonl(f, [record("a", 16, 10.0)])
    run("compare", f, f, code=0)


@case()
def every_float_option_refuses_nan_and_infinity():
    # One validator on every FLOAT option, registered or to come: found by
    # walking --help of every command for options CLI11 types FLOAT.
    import re
    cmds = [["compare"], ["plot"], ["trace", "stats"], ["trace", "import"]]
    top = run("--help", code=0).stdout
    for fam in FAMILIES:
        cmds.append([fam.COMMAND])
        cmds.append(["gen", fam.COMMAND])
    seen = 0
    for c in cmds:
        for opt in re.findall(r"(--[a-z0-9-]+) FLOAT", run(*c, "--help", code=0).stdout):
            seen += 1
            for bad in ("nan", "inf"):
                p = run(*c, opt, bad, code=2)
                one_line_error(p, opt)
    expect(seen >= 4, f"only {seen} FLOAT options found: the --help format changed?")


# ---- plot --------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


@case()
def plot_draws_one_line_per_variant():
    d = tmp()
    res = os.path.join(d, "r.jsonl")
    recs = []
    for e in (64, 256):
        for v, scale in (("fast", 1.0), ("slow", 3.0)):
            for t in (1, 16, 256, 4096):
                r = record(v, t, scale * (2 + t / 100))
                r["params"]["E"] = e
                r["params"]["max_num_tokens_padded"] = t * 8 + e * 127  # follows from tokens: no panel of its own
                r["params"]["numel"] = t * 8  # so does this: two derived parameters must not shield each other
                r["params"]["topk"] = 2 if e == 64 else 8  # one constant per panel: kept for the title
                recs.append(r)
    write_jsonl(res, recs)
    svg = os.path.join(d, "c.svg")
    p = run("plot", res, "-o", svg, code=0)
    expect(svg in p.stdout, p.stdout)
    root = ET.parse(svg).getroot()
    expect(root.tag == SVG + "svg", root.tag)
    panels = root.findall(f"{SVG}g[@class='panel']")
    expect(len(panels) == 2, f"{len(panels)} panels")
    expect(sorted(p.get("data-group") for p in panels) == ["E=256 topk=8", "E=64 topk=2"],
           [p.get("data-group") for p in panels])
    for panel in panels:
        series = panel.findall(f"{SVG}polyline[@class='series']")
        expect(sorted(s.get("data-variant") for s in series) == ["fast", "slow"], "variants")
        for s in series:
            expect(len(s.get("points").split()) == 4, s.get("points"))
        pts = panel.findall(f"{SVG}circle[@class='point']")
        xs = sorted({float(c.get("data-x")) for c in pts})
        expect(xs == [1, 16, 256, 4096] and len(pts) == 8, xs)
        slow = [float(c.get("data-y")) for c in pts if c.get("data-variant") == "slow"]
        expect(abs(min(slow) - 3 * 2.01) < 1e-6, slow)
        # lower time is drawn lower (larger y): log axis the right way up
        ys = {c.get("data-variant"): float(c.get("cy")) for c in pts if c.get("data-x") == "1"}
        expect(ys["fast"] > ys["slow"], ys)
        for cls in ["xlabel", "ylabel", "legend", "panel-title"]:
            expect(panel.find(f"{SVG}text[@class='{cls}']") is not None, f"no {cls}")
        expect("tokens" in panel.find(f"{SVG}text[@class='xlabel']").text, "x label")
    expect("demo" in root.find(f"{SVG}text[@class='title']").text, "title")
    # GB/s
    run("plot", res, "-o", svg, "--metric", "gbps", code=0)
    root = ET.parse(svg).getroot()
    expect("GB/s" in root.find(f"{SVG}g/{SVG}text[@class='ylabel']").text, "gbps label")
    # errors: a bad file, no usable record; the previous chart stays
    before = open(svg).read()
    bad = os.path.join(d, "bad.jsonl")
    write(bad, "{oops\n")
    one_line_error(run("plot", bad, "-o", svg, code=2), bad + ":1")
    write_jsonl(bad, [dict(record("a", 16, 1.0), time_us=None)])
    one_line_error(run("plot", bad, "-o", svg, code=2), "time")
    expect(open(svg).read() == before, "a failed plot changed the chart")


def plot_file(d, recs, *extra, code=0):
    res, svg = os.path.join(d, "r.jsonl"), os.path.join(d, "c.svg")
    write_jsonl(res, recs)
    p = limited_run("plot", res, "-o", svg, *extra)  # capped memory and time: a runaway loop fails
    expect(p.returncode == code, f"plot exit {p.returncode}, want {code}: {p.stderr}")
    return p, (ET.parse(svg).getroot() if code == 0 else None)


def coords(root):
    """Every numeric drawing coordinate of the chart, and the canvas size."""
    w, h = float(root.get("width")), float(root.get("height"))
    vals = []
    for el in root.iter():
        for a in ("x", "y", "x1", "x2", "y1", "y2", "cx", "cy"):
            if el.get(a) is not None:
                vals.append((a, float(el.get(a))))
        if el.get("points"):
            for pt in el.get("points").split():
                x, y = pt.split(",")
                vals += [("x", float(x)), ("y", float(y))]
    return w, h, vals


def expect_on_canvas(root):
    w, h, vals = coords(root)
    for a, v in vals:
        expect(v == v and abs(v) != float("inf"), f"{a}={v}: not a finite coordinate")
        expect(-1 <= v <= (w if a.startswith("x") or a == "cx" else h) + 1, f"{a}={v} off the {w}x{h} canvas")


@case()
def plot_extreme_values_draw_finite_coordinates():
    # issue 31: NaN coordinates for tiny or very wide ranges, and a tick loop
    # that never ended (growing to gigabytes) on a value near the double maximum.
    d = tmp()
    for times in ([5e-324, 1e-320], [1.7e308, 1e308], [1e-300, 1e300], [3.0, 3.0], [1e-6, 1e-6 * (1 + 1e-12)]):
        recs = [dict(record("a", t, 1.0), time_us={"median": m, "min": m, "max": m, "samples": 1})
                for t, m in zip((1, 1e308), times)]
        p, root = plot_file(d, recs)
        attrs = re.findall(r'="([^"]*)"', open(os.path.join(d, "c.svg")).read())
        expect(not [a for a in attrs if "nan" in a.lower() or "inf" in a.lower()], f"{times}: {attrs[:40]}")
        expect_on_canvas(root)
        pts = root.findall(f".//{SVG}circle[@class='point']")
        expect(len(pts) == 2, f"{times}: {len(pts)} points")
        ticks = [t for t in root.iter(f"{SVG}text") if t.get("class") is None]
        expect(4 <= len(ticks) <= 40, f"{times}: {len(ticks)} tick labels")


@case()
def plot_axes_fit_the_data():
    # issue 31: axes padded to whole decades left half a panel empty. The
    # points span (nearly) the whole plot area in x and in y.
    d = tmp()
    recs = [record("a", t, 20 + t / 2) for t in (20, 40, 80, 160, 300)]
    _, root = plot_file(d, recs)
    panel = root.find(f"{SVG}g[@class='panel']")
    rect = panel.find(f"{SVG}rect")
    x0, w = float(rect.get("x")), float(rect.get("width"))
    y0, h = float(rect.get("y")), float(rect.get("height"))
    cx = [float(c.get("cx")) for c in panel.findall(f"{SVG}circle")]
    cy = [float(c.get("cy")) for c in panel.findall(f"{SVG}circle")]
    expect(max(cx) - min(cx) >= 0.8 * w and min(cx) >= x0 and max(cx) <= x0 + w, f"x {min(cx)}..{max(cx)} of {x0}+{w}")
    expect(max(cy) - min(cy) >= 0.75 * h and min(cy) >= y0 and max(cy) <= y0 + h, f"y {min(cy)}..{max(cy)} of {y0}+{h}")


@case()
def plot_zero_time_is_left_out():
    # regression.md: a record without a positive time is left out and counted,
    # not an error; compare calls it untimed. A zero minimum has no spread below.
    d = tmp()
    zero = dict(record("a", 64, 1.0), time_us={"median": 0, "min": 0, "max": 0, "samples": 3})
    low = dict(record("a", 32, 1.0), time_us={"median": 2.0, "min": 0, "max": 3.0, "samples": 3})
    _, root = plot_file(d, [record("a", 16, 1.0), low, zero])
    expect(len(root.findall(f".//{SVG}circle[@class='point']")) == 2, "two points")
    expect("1 record(s)" in "".join(root.find(f"{SVG}text[@class='footer']").itertext()), "footer count")
    expect_on_canvas(root)
    o = json.loads(compare(d, [zero], [zero], "--format", "json", code=0).stdout)
    expect(o["cells"][0]["verdict"] == "untimed", o)


@case()
def plot_text_stays_on_the_canvas_and_valid():
    # issue 31: long panel titles clipped; legends cut inside a UTF-8
    # character; legend entries past ~19 variants off the canvas; U+FFFE/U+FFFF
    # made the SVG invalid XML.
    d = tmp()
    recs = []
    for i in range(25):
        for t in (16, 256):
            r = record(f"variant{i:02d}" + ("\u00e9" * 40 if i == 0 else "") + ("\uffff\ufffe" if i == 1 else ""),
                       t, 1.0 + i)
            r["params"]["label"] = "a-long-parameter-value " * 8
            recs.append(r)
    _, root = plot_file(d, recs, "--title", "a very long chart title " * 8)
    w, h, _ = coords(root)
    expect_on_canvas(root)
    for el in root.iter(f"{SVG}text"):
        if el.get("class") in ("title", "panel-title"):
            size = float(el.get("font-size"))
            lines = [t.text for t in el.findall(f"{SVG}tspan")] or [el.text]
            expect(len(lines) >= 2, f"{el.get('class')}: not wrapped: {lines}")
            for line in lines:
                expect(len(line) * 0.6 * size <= w, f"{el.get('class')} line of {len(line)} characters: {line!r}")
    panel = root.find(f"{SVG}g[@class='panel']")
    rect = panel.find(f"{SVG}rect")
    bottom = float(rect.get("y")) + float(rect.get("height"))
    legends = panel.findall(f"{SVG}text[@class='legend']")
    expect(len(legends) == 25, len(legends))
    for lg in legends:
        expect(float(lg.get("y")) <= bottom, f"legend {lg.text!r} at y={lg.get('y')}, below the panel ({bottom})")
    first = next(lg.text for lg in legends if lg.text.startswith("variant00"))
    expect(first == "variant00" + "\u00e9" * 18 + "...", repr(first))


# ---- hostile inputs --------------------------------------------------------------

@case()
def tools_refuse_special_files_and_deep_nesting():
    # FIFOs are refused, not waited on; nesting that would make the parsed value's
    # walks recurse without bound is refused at parse time.
    d = tmp()
    fifo = os.path.join(d, "f")
    os.mkfifo(fifo)
    fam = FAMILIES[0]
    one_line_error(run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--results", fifo, code=2), "regular file")
    one_line_error(run("trace", "import", "jsonl", fifo, "-o", os.path.join(d, "o"), code=2), "regular file")
    one_line_error(run("compare", fifo, fifo, code=2), "regular file")
    one_line_error(run("plot", fifo, "-o", os.path.join(d, "c.svg"), code=2), "regular file")
    deep = os.path.join(d, "deep.json")
    write(deep, "[" * 100000 + "]" * 100000)
    one_line_error(run("trace", "import", "json", deep, "-o", os.path.join(d, "o"), code=2), deep, "nested deeper")
    write(deep, json.dumps(record("a", 1, 1.0))[:-1] + ', "x": ' + "[" * 1000 + "]" * 1000 + "}\n")
    one_line_error(run("compare", deep, deep, code=2), deep + ":1", "nested deeper")
    expect(not os.path.exists(os.path.join(d, "o")) or not os.listdir(os.path.join(d, "o")), "o written")


@case()
def info_names_versions_and_build_on_every_machine():
    # README: `moekit info` shows the versions; without a GPU it printed one line.
    p = run("info", code=0)
    for want in ("device:", "CUDA driver/runtime:", "build:", "SASS for sm_"):
        expect(want in p.stdout, f"{want!r} not in {p.stdout!r}")
    o = json.loads(run("info", "--format", "json", code=0).stdout)
    expect(o["runtime"] and o["build"] and o["gpu_arch"] and "driver" in o, o)
