"""CLI cases of the align family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import json
import os

from cli_harness import DATA, SKIP, case, expect, has_gpu, load_npy, run, save_npy, tmp


TRACE = os.path.join(DATA, "trace_4096x8_e256.npy")
COMMAND = "align"
# A small run every variant name can be tried on, on the CPU.
SMALL_ARGS = ["--topk-ids", TRACE, "-E", 256]
# The bundled input every variant runs on in the GPU case.
BUNDLED_ARGS = ["--topk-ids", TRACE, "-E", 256, "-B", 128]
# (args, a word the one-line error must contain): rejected before allocating.
OVERSIZED = [
    (["gen", "align", "--tokens", 300000000, "--topk", 8, "-E", 256, "-o", "{out}"], "too large"),
    # numel fits int32 but numel + E*(B-1) does not: fail before generating 2e9 ids
    (["align", "--tokens", 268000000, "--topk", 8, "-E", 65536, "-B", 1024, "--device", "cpu"], "int32"),
    (["gen", "load", "--tokens", 100000000, "--topk", 8, "-E", 256, "--layers", 100, "-o", "{out}"], "too large"),
    (["gen", "expert-map", "--global-experts", 1 << 40, "--ranks", 8, "-o", "{out}"], "--global-experts"),
]


@case()
def align_help_lists_options():
    o = run("align", "--help", code=0).stdout
    for opt in ["--variant", "--device", "--out", "--check", "--bench", "--warmup", "--iters", "--cold",
                "--graph", "--format", "--profile", "--seed", "--num-experts", "--block-size",
                "--expert-map", "--pad-sorted-ids", "--ignore-invalid", "--invalid", "--map-semantics"]:
        expect(opt in o, f"align --help lacks {opt}")
    expect("deprecated alias of --invalid drop" in o, "--help says --ignore-invalid is deprecated")
    expect("local (default" in o, "--help says local map semantics are the default")


@case()
def align_usage_errors_exit_2():
    run("align", "--topk-ids", TRACE, code=2)  # --num-experts missing
    run("align", "--topk-ids", TRACE, "-E", "256", "--format", "xml", code=2)
    run("align", "--topk-ids", TRACE, "-E", "256", "--device", "tpu", code=2)
    run("align", "--topk-ids", TRACE, "-E", "256", "--iters", "0", code=2)


@case()
def align_info_describes_trace():
    out = run("info", TRACE, code=0).stdout
    expect("int32" in out and "4096" in out, f"info: {out}")


def align_outputs(d):
    _, s = load_npy(os.path.join(d, "sorted_token_ids.npy"))
    _, e = load_npy(os.path.join(d, "expert_ids.npy"))
    _, n = load_npy(os.path.join(d, "num_tokens_post_pad.npy"))
    return s, e, n[0]


def align_model(ids, E, B, emap=None, invalid="drop", semantics="local"):
    """Independent model of the semantics (ascending slots within a group).

    Groups are the E experts, then with invalid="bucket" one more for the slots
    that would be dropped, labelled -1. semantics="vllm": E global experts,
    expert_ids relabelled through emap afterwards."""
    local_map = emap is not None and semantics == "local"
    groups = [[] for _ in range(E + (invalid == "bucket"))]
    for i, g in enumerate(ids):
        e = g
        if local_map:
            e = emap[g] if 0 <= g < len(emap) else -1
        if 0 <= e < E:
            groups[e].append(i)
        elif invalid == "bucket":
            groups[E].append(i)
    maxpad = len(ids) + min(len(ids), len(groups)) * (B - 1)
    s = [len(ids)] * maxpad
    eids = [-1] * ((maxpad + B - 1) // B)
    pos = 0
    for e, slots in enumerate(groups):
        label = -1 if e == E else emap[e] if emap is not None and semantics == "vllm" else e
        s[pos:pos + len(slots)] = slots
        nb = (len(slots) + B - 1) // B
        for j in range(nb):
            eids[pos // B + j] = label
        pos += nb * B
    return s, eids, pos


@case()
def gen_align_distinct_per_token():
    d = tmp()
    for dist in ["uniform", "zipf:1.2", "hot:0.5"]:
        f = os.path.join(d, "t.npy")
        run("gen", "align", "--tokens", 300, "--topk", 8, "--num-experts", 16, "--dist", dist, "-o", f, code=0)
        hdr, v = load_npy(f)
        expect(hdr["descr"] == "<i4" and hdr["shape"] == (300, 8), f"header {hdr}")
        for t in range(300):
            row = v[t * 8:(t + 1) * 8]
            expect(len(set(row)) == 8 and all(0 <= x < 16 for x in row), f"{dist}: token {t} row {row}")
    f = os.path.join(d, "t64.npy")
    run("gen", "align", "--tokens", 5, "--topk", 2, "-E", 4, "--dtype", "int64", "-o", f, code=0)
    expect(load_npy(f)[0]["descr"] == "<i8", "int64 trace")
    run("gen", "align", "--tokens", 5, "--topk", 9, "-E", 8, "-o", f, code=2)
    run("gen", "align", "--tokens", 5, "--topk", 2, "-E", 8, "--dist", "zipf:x", "-o", f, code=2)


@case()
def align_cpu_matches_model():
    d = tmp()
    f = os.path.join(d, "ids.npy")
    run("gen", "align", "--tokens", 333, "--topk", 4, "-E", 37, "--dist", "zipf:1.1", "-o", f, code=0)
    out = os.path.join(d, "out")
    p = run("align", "--topk-ids", f, "-E", 37, "-B", 16, "--device", "cpu", "--out", out, code=0)
    expect("check: pass" in p.stdout, p.stdout)
    _, ids = load_npy(f)
    expect(align_outputs(out) == align_model(ids, 37, 16), "CPU outputs differ from the model")


@case()
def align_expert_map_and_invalid():
    d = tmp()
    f, m = os.path.join(d, "ids.npy"), os.path.join(d, "map.npy")
    ids = [0, 5, 3, 7, 1, 1, 6, 2, 4, 5]
    emap = [-1, 0, 1, -1, 2, 3, -1, 1]  # 8 global experts -> 4 local
    save_npy(f, "<i4", (5, 2), ids)
    save_npy(m, "<i4", (8,), emap)
    out = os.path.join(d, "o")
    run("align", "--topk-ids", f, "-E", 4, "-B", 4, "--expert-map", m, "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == align_model(ids, 4, 4, emap), "expert map semantics")
    # out-of-range ids: rejected by default (first bad index named), dropped with --ignore-invalid
    save_npy(f, "<i4", (4,), [1, -1, 2, 9])
    p = run("align", "--topk-ids", f, "-E", 4, "-B", 2, "--device", "cpu", code=2)
    expect("index 1" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    run("align", "--topk-ids", f, "-E", 4, "-B", 2, "--device", "cpu", "--ignore-invalid", "--out", out, code=0)
    expect(align_outputs(out) == align_model([1, -1, 2, 9], 4, 2), "--ignore-invalid semantics")
    save_npy(m, "<i4", (8,), [0, 1, 2, 3, 4, 0, 0, 0])  # maps to 4 with E=4
    run("align", "--topk-ids", f, "-E", 4, "--expert-map", m, "--ignore-invalid", "--device", "cpu", code=2)


@case()
def align_bad_inputs_exit_2():
    d = tmp()
    f = os.path.join(d, "f.npy")
    save_npy(f, "<f4", (4,), [1.0, 2.0, 3.0, 4.0])
    p = run("align", "--topk-ids", f, "-E", 8, "--device", "cpu", code=2)
    expect(f in p.stderr and "int32" in p.stderr, p.stderr)
    save_npy(f, "<i4", (4,), [1, 2, 3, 4])
    run("align", "--topk-ids", f, "-E", 0, "--device", "cpu", code=2)
    run("align", "--topk-ids", f, "-E", 8, "-B", 0, "--device", "cpu", code=2)
    run("align", "--topk-ids", f, "-E", 8, "-B", 2000, "--device", "cpu", code=2)
    # numel + E*(B-1) overflows int32
    p = run("align", "--topk-ids", f, "-E", 2147483647, "-B", 1024, "--device", "cpu", code=2)
    expect(p.stderr.count("\n") == 1, f"one-line error wanted: {p.stderr!r}")
    run("align", "--topk-ids", os.path.join(d, "nope.npy"), "-E", 8, "--device", "cpu", code=2)
    with open(f, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00garbage")
    run("align", "--topk-ids", f, "-E", 8, "--device", "cpu", code=2)


@case()
def align_zero_tokens():
    d = tmp()
    f = os.path.join(d, "z.npy")
    save_npy(f, "<i4", (0, 8), [])
    out = os.path.join(d, "o")
    run("align", "--topk-ids", f, "-E", 4, "-B", 3, "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == align_model([], 4, 3), "0 tokens")


@case()
def align_json_and_csv_reports():
    p = run("align", "--topk-ids", TRACE, "-E", 256, "--device", "cpu", "--bench", "--iters", 3,
            "--format", "json", code=0)
    lines = p.stdout.strip().splitlines()
    expect(len(lines) == 1, f"one JSON object per run: {p.stdout}")
    o = json.loads(lines[0])
    for k in ["op", "variant", "params", "dtype", "device", "check", "time_us", "bytes", "gbps", "pct_of_peak"]:
        expect(k in o, f"json lacks {k}")
    expect(o["op"] == "align" and o["params"]["numel"] == 4096 * 8, f"{o}")
    expect(o["time_us"]["samples"] >= 1 and o["time_us"]["min"] <= o["time_us"]["median"] <= o["time_us"]["max"],
           f"time_us {o['time_us']}")
    expect(o["check"]["result"] == "n/a", f"cpu check {o['check']}")
    p = run("align", "--topk-ids", TRACE, "-E", 256, "--device", "cpu", "--format", "csv", code=0)
    head, row = p.stdout.strip().splitlines()
    expect(len(head.split(",")) == len(row.split(",")), "csv header/row widths")


@case()
def align_device_gpu_without_gpu_exits_3():
    if has_gpu():
        return SKIP
    p = run("align", "--topk-ids", TRACE, "-E", 256, "--device", "gpu", code=3)
    expect("no CUDA device" in p.stderr, p.stderr)
    p = run("align", "--topk-ids", TRACE, "-E", 256, code=0)  # auto: falls back, says so
    expect("no CUDA device found" in p.stdout, p.stdout)


@case()
def align_synthetic_input():
    p = run("align", "--tokens", 100, "--topk", 4, "-E", 16, "--device", "cpu", "--format", "json", code=0)
    o = json.loads(p.stdout)
    expect(o["params"]["numel"] == 400 and o["params"]["tokens"] == 100 and o["params"]["topk"] == 4, f"{o['params']}")


@case()
def align_short_expert_map_is_named():
    d = tmp()
    f, m = os.path.join(d, "ids.npy"), os.path.join(d, "map.npy")
    save_npy(f, "<i4", (3,), [0, 6, 1])
    save_npy(m, "<i4", (4,), [0, 1, 2, 3])
    p = run("align", "--topk-ids", f, "-E", 4, "--expert-map", m, "--device", "cpu", code=2)
    expect(m in p.stderr and "length 4" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case()
def align_generator_options_refused_with_a_file():
    for extra in [["--tokens", 5], ["--dist", "bogus"], ["--topk", 3]]:
        p = run("align", "--topk-ids", TRACE, "-E", 256, *extra, "--device", "cpu", code=2)
        expect(p.stderr.startswith("moekit: ") and str(extra[0]) in p.stderr, p.stderr)
        expect(len(p.stderr.strip().splitlines()) == 1, p.stderr)
    # --topk larger than E names the align options, not `gen align`
    p = run("align", "--tokens", 16, "--topk", 9, "-E", 8, "--device", "cpu", code=2)
    expect("--topk" in p.stderr and "gen align" not in p.stderr, p.stderr)


@case()
def align_variant_applicability_same_on_cpu():
    # micro takes at most 256 slots whatever the machine: a CPU run refuses it as a GPU run would
    p = run("align", "--tokens", 65536, "--topk", 8, "-E", 64, "--variant", "micro", "--device", "cpu", code=2)
    expect("does not apply" in p.stderr, p.stderr)


@case()
def align_reports_say_what_ran():
    d = tmp()
    p = run("align", "--topk-ids", TRACE, "-E", 256, "--device", "cpu", "--out", os.path.join(d, "o"), code=0)
    expect("num_tokens_post_pad=" in p.stdout and "no kernel ran" in p.stdout, p.stdout)
    o = json.loads(run("align", "--topk-ids", TRACE, "-E", 256, "--device", "cpu", "--format", "json",
                       code=0).stdout)
    expect(o["params"]["expert_map"] is None and o["error"] is None, o)
    expect(o["summary"]["num_tokens_post_pad"] > 0, o)
    # a failed run with --format json still prints one object, with the error
    p = run("align", "--topk-ids", os.path.join(d, "missing.npy"), "-E", 8, "--format", "json", code=2)
    o = json.loads(p.stdout)
    expect(o["error"]["exit_code"] == 2 and "missing.npy" in o["error"]["message"], o)
    expect(len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case()
def align_huge_expert_count_refused_before_allocating():
    # A 1-id file with E = 2^31 - 1 once allocated three E-long arrays (23.5 GB) and was killed.
    d = tmp()
    f = os.path.join(d, "one.npy")
    save_npy(f, "<i4", (1, 1), [0])
    from cli_harness import limited_run
    for args in [["align", "--topk-ids", f, "-E", 2147483647, "-B", 1, "--device", "cpu"],
                 ["gen", "align", "--tokens", 1, "--topk", 1, "-E", 2147483647, "-o", os.path.join(d, "g.npy")]]:
        p = limited_run(*args)
        expect(p.returncode == 2 and "65536" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
               f"{args}: exit {p.returncode}, {p.stderr!r}")
    expect("65536" in run("align", "--help", code=0).stdout, "--help states the bound on E")
    # a shape whose host memory is over the machine's budget is refused, not killed
    p = limited_run("gen", "align", "--tokens", 200000000, "--topk", 8, "-E", 256, "-o", os.path.join(d, "g.npy"),
                    mem_gb=1)
    expect(p.returncode == 2 and "host memory" in p.stderr, f"exit {p.returncode}, {p.stderr!r}")


@case()
def align_on_the_recorded_traces():
    # The bundled real router traces (data/README.md): every one runs through align on the CPU,
    # its written outputs equal the independent model, and its skew is what the README says.
    for name, E, B, topk in [("deepseek_v2_lite_l13_prefill1024.npy", 64, 64, 6),
                             ("llama4_maverick_l23_prefill.npy", 128, 16, 1),
                             ("llama4_maverick_l23_decode_step0.npy", 128, 16, 1)]:
        f = os.path.join(DATA, name)
        hdr, ids = load_npy(f)
        expect(hdr["descr"] == "<i4" and hdr["shape"][1] == topk and all(0 <= x < E for x in ids), f"{name}: {hdr}")
        out = os.path.join(tmp(), "o")
        run("align", "--topk-ids", f, "-E", E, "-B", B, "--device", "cpu", "--out", out, code=0)
        expect(align_outputs(out) == align_model(ids, E, B), f"{name}: outputs differ from the model")
    _, ids = load_npy(os.path.join(DATA, "llama4_maverick_l23_prefill.npy"))
    counts = [ids.count(e) for e in range(128)]
    expect(max(counts) / (len(ids) / 128) > 10, "the Llama-4 prefill trace is far from uniform")


@case()
def gen_align_from_a_recorded_load():
    d = tmp()
    loads, f = os.path.join(d, "loads.npy"), os.path.join(d, "t.npy")
    save_npy(loads, "<i8", (2, 4), [0, 0, 0, 0, 5, 0, 5, 0])  # layer 0 dense (all zero); layer 1: experts 0 and 2
    run("gen", "align", "--tokens", 500, "--topk", 1, "-E", 4, "--dist", f"load:{loads}:1", "-o", f, code=0)
    _, ids = load_npy(f)
    expect(set(ids) == {0, 2} and 150 < ids.count(0) < 350, f"drawn experts {sorted(set(ids))}, {ids.count(0)} x 0")
    p = run("gen", "align", "--tokens", 5, "--topk", 1, "-E", 4, "--dist", f"load:{loads}:0", "-o", f, code=2)
    expect("every load is 0" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run("gen", "align", "--tokens", 5, "--topk", 1, "-E", 8, "--dist", f"load:{loads}:1", "-o", f, code=2)
    expect("4 loads for --num-experts 8" in p.stderr, p.stderr)
    run("align", "--tokens", 64, "--topk", 1, "-E", 4, "--dist", f"load:{loads}", "--device", "cpu", code=0)


@case()
def align_sweep_of_shapes():
    # The cartesian product of list-valued shape options: one run, one record per cell.
    import xml.etree.ElementTree as ET
    d = tmp()
    res = os.path.join(d, "r.jsonl")
    p = run("align", "--tokens", "1,16,256", "-E", "64,256", "--topk", 8, "--device", "cpu", "--bench", "--iters", 2,
            "--format", "json", "--results", res, code=0)
    objs = [json.loads(l) for l in p.stdout.splitlines()]
    cells = [(o["params"]["tokens"], o["params"]["topk"], o["params"]["numel"], o["params"]["num_experts"])
             for o in objs]
    expect(cells == [(t, 8, t * 8, e) for t in (1, 16, 256) for e in (64, 256)], f"cells {cells}")
    with open(res) as f:
        expect([json.loads(l)["params"]["numel"] for l in f] == [c[2] for c in cells], "one record per cell")
    # equal numel, different shapes: distinct records (8 x 2 and 16 x 1)
    p = run("align", "--tokens", "8,16", "--topk", "2,1", "-E", 16, "--device", "cpu", "--format", "json", code=0)
    shapes = {(o["params"]["tokens"], o["params"]["topk"]) for o in map(json.loads, p.stdout.splitlines())}
    expect(len(shapes) == 4, shapes)
    # a cell that fails (topk > E) is reported; the others run
    p = run("align", "--tokens", 4, "-E", "4,64", "--topk", 8, "--device", "cpu", code=2)
    expect("E=4" in p.stderr and p.stdout.count("== sweep cell") == 2, p.stdout + p.stderr)
    # --out: a folder per cell
    out = os.path.join(d, "o")
    run("align", "--tokens", "3,5", "-E", 8, "--topk", 2, "--device", "cpu", "--out", out, code=0)
    for t in (3, 5):
        hdr, _ = load_npy(os.path.join(out, f"tokens={t}", "sorted_token_ids.npy"))
        expect(hdr["shape"] == (t * 2 + min(t * 2, 8) * 127,), f"tokens={t}: {hdr}")  # tight bound
    # the plot of the sweep: x = tokens, one panel per E (numel and the padded size follow), 3 points each
    svg = os.path.join(d, "c.svg")
    run("plot", res, "-o", svg, code=0)
    ns = "{http://www.w3.org/2000/svg}"
    panels = ET.parse(svg).getroot().findall(f"{ns}g[@class='panel']")
    expect(sorted(p.get("data-group") for p in panels) == [
        "block_size=128 expert_map=null invalid=reject map_semantics=local num_experts=256 topk=8",
        "block_size=128 expert_map=null invalid=reject map_semantics=local num_experts=64 topk=8"],
           [p.get("data-group") for p in panels])
    for panel in panels:
        expect(len(panel.findall(f"{ns}circle[@class='point']")) == 3, "3 token counts per panel")


@case()
def align_invalid_modes():
    d = tmp()
    f, out = os.path.join(d, "ids.npy"), os.path.join(d, "o")
    ids = [2, -1, 0, 5, 2, 1, -1, 3]
    save_npy(f, "<i4", (8,), ids)
    # reject (the default) names the first invalid id; drop = the deprecated --ignore-invalid
    p = run("align", "--topk-ids", f, "-E", 3, "-B", 2, "--device", "cpu", code=2)
    expect("index 1" in p.stderr and "--invalid" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run("align", "--topk-ids", f, "-E", 3, "-B", 2, "--invalid", "reject", "--device", "cpu", code=2)
    for flag in (["--invalid", "drop"], ["--ignore-invalid"]):
        p = run("align", "--topk-ids", f, "-E", 3, "-B", 2, *flag, "--device", "cpu", "--out", out, code=0)
        expect(align_outputs(out) == align_model(ids, 3, 2), f"{flag}")
        expect("4 invalid id(s) dropped" in p.stdout, p.stdout)
    # bucket: one more group AFTER the experts, padded to B, expert_ids -1, its slots real rows
    p = run("align", "--topk-ids", f, "-E", 3, "-B", 2, "--invalid", "bucket", "--device", "cpu", "--out", out,
            code=0)
    s, e, n = align_outputs(out)
    expect((s, e, n) == align_model(ids, 3, 2, invalid="bucket"), f"bucket {s} {e} {n}")
    expect(n == 10 and s[:10] == [2, 8, 5, 8, 0, 4, 1, 3, 6, 7] and e[:5] == [0, 1, 2, -1, -1], f"{s} {e} {n}")
    expect(len(s) == 8 + 4 * 1, f"max_num_tokens_padded counts the bucket: {len(s)}")
    expect("4 slot(s) in the bucket" in p.stdout, p.stdout)
    # the report's params
    for mode in ("reject", "drop", "bucket"):
        args = ["--invalid", mode] if mode != "reject" else []
        o = json.loads(run("align", "--topk-ids", TRACE, "-E", 256, *args, "--device", "cpu", "--format", "json",
                           code=0).stdout)
        expect(o["params"]["invalid"] == mode and o["params"]["map_semantics"] == "local", o["params"])
    # a bad value, and the alias with --invalid: usage errors
    p = run("align", "--topk-ids", f, "-E", 3, "--invalid", "ignore", "--device", "cpu", code=2)
    expect("--invalid" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    run("align", "--topk-ids", f, "-E", 3, "--invalid", "bucket", "--ignore-invalid", "--device", "cpu", code=2)
    run("align", "--topk-ids", f, "-E", 3, "--map-semantics", "global", "--device", "cpu", code=2)
    # E + the bucket past the largest E any variant takes
    p = run("align", "--topk-ids", f, "-E", 65536, "--invalid", "bucket", "--device", "cpu", code=2)
    expect("65535" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    # all invalid, and 0 tokens, with the bucket
    save_npy(f, "<i4", (3,), [-1, 7, -1])
    run("align", "--topk-ids", f, "-E", 2, "-B", 4, "--invalid", "bucket", "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == ([0, 1, 2] + [3] * 9, [-1, -1, -1], 4), f"{align_outputs(out)}")
    save_npy(f, "<i4", (0, 4), [])
    run("align", "--topk-ids", f, "-E", 2, "-B", 4, "--invalid", "bucket", "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == align_model([], 2, 4, invalid="bucket"), f"{align_outputs(out)}")


@case()
def align_bucket_takes_non_local_experts():
    d = tmp()
    f, m, out = os.path.join(d, "ids.npy"), os.path.join(d, "map.npy"), os.path.join(d, "o")
    ids = [0, 1, 4, 3, 7, 2, -1, 1]
    emap = [-1, 0, 1, -1, 2]  # 5 global experts -> 3 local
    save_npy(f, "<i4", (4, 2), ids)
    save_npy(m, "<i4", (5,), emap)
    base = ["align", "--topk-ids", f, "-E", 3, "-B", 2, "--expert-map", m, "--device", "cpu", "--out", out]
    run(*base, "--invalid", "bucket", code=0)
    expect(align_outputs(out) == align_model(ids, 3, 2, emap, invalid="bucket"), "bucket with a local map")
    run(*base, "--invalid", "drop", code=0)
    expect(align_outputs(out) == align_model(ids, 3, 2, emap), "drop with a local map")
    p = run(*base, code=2)  # 7 and -1 are outside the map
    expect(m in p.stderr and "length 5" in p.stderr, p.stderr)


@case()
def align_vllm_map_semantics():
    d = tmp()
    f, m, out = os.path.join(d, "ids.npy"), os.path.join(d, "map.npy"), os.path.join(d, "o")
    ids = [3, 0, 2, 0, 1, 3, 2, 1]
    emap = [1, -1, 0, -1]  # 4 global experts, 2 local
    save_npy(f, "<i4", (4, 2), ids)
    save_npy(m, "<i4", (4,), emap)
    p = run("align", "--topk-ids", f, "-E", 4, "-B", 2, "--expert-map", m, "--map-semantics", "vllm",
            "--device", "cpu", "--out", out, "--format", "json", code=0)
    o = json.loads(p.stdout)
    expect(o["params"]["map_semantics"] == "vllm" and o["params"]["expert_map"] == 4, o["params"])
    s, e, n = align_outputs(out)
    expect((s, e, n) == align_model(ids, 4, 2, emap, semantics="vllm"), f"vllm {s} {e} {n}")
    expect(e[:4] == [1, -1, 0, -1] and n == 8, f"expert_ids relabelled through the map: {e}")
    # local (the default) on the same map: E is the local count
    run("align", "--topk-ids", f, "-E", 2, "-B", 2, "--expert-map", m, "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == align_model(ids, 2, 2, emap), "local semantics")
    # vllm with the bucket: ids outside [0, E) after the global experts
    save_npy(f, "<i4", (4, 2), [3, 0, 9, 0, 1, -1, 2, 1])
    run("align", "--topk-ids", f, "-E", 4, "-B", 2, "--expert-map", m, "--map-semantics", "vllm",
        "--invalid", "bucket", "--device", "cpu", "--out", out, code=0)
    expect(align_outputs(out) == align_model([3, 0, 9, 0, 1, -1, 2, 1], 4, 2, emap, "bucket", "vllm"),
           "vllm + bucket")
    # a vllm map must have E entries: one line naming the file
    save_npy(m, "<i4", (5,), [1, -1, 0, -1, 0])
    p = run("align", "--topk-ids", f, "-E", 4, "--expert-map", m, "--map-semantics", "vllm", "--invalid", "drop",
            "--device", "cpu", code=2)
    expect(m in p.stderr and "vllm" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case("gpu")
def align_ep_modes_on_gpu():
    # Every variant through the expert-parallel passes, from the CLI (workspace sizing, zeroing, check).
    if not has_gpu():
        return SKIP
    d = tmp()
    f, m = os.path.join(d, "ids.npy"), os.path.join(d, "map.npy")
    _, ids = load_npy(TRACE)
    ids = [(-1 if i % 17 == 0 else 300 if i % 23 == 0 else x) for i, x in enumerate(ids)]
    save_npy(f, "<i4", (4096, 8), ids)
    save_npy(m, "<i4", (300,), [(-1 if g % 5 == 0 else g % 128) for g in range(300)])
    modes = [["-E", 256, "--invalid", "bucket"], ["-E", 256, "--invalid", "drop"],
             ["-E", 128, "--invalid", "bucket", "--expert-map", m],
             ["-E", 300, "--invalid", "bucket", "--expert-map", m, "--map-semantics", "vllm"]]
    variants = [json.loads(l)["variant"] for l in run("variants", "align", "--format", "json", code=0).stdout.splitlines()]
    for extra in modes:
        for v in variants:
            args = ["align", "--topk-ids", f, "-B", 64, *extra, "--variant", v, "--device", "gpu",
                    "--format", "json"]
            p = run(*args)
            if p.returncode == 2 and "does not apply" in p.stderr:
                continue
            expect(p.returncode == 0, f"{extra} {v}: exit {p.returncode}: {p.stderr}")
            o = json.loads(p.stdout)
            expect(o["check"]["result"] == "pass", f"{extra} {v}: {o['check']}")


@case()
def gen_expert_map_places_experts_on_ranks():
    d = tmp()
    m = os.path.join(d, "map.npy")
    # Hand-listed: 10 experts over 4 ranks, the first 10 % 4 = 2 ranks one more.
    want = {
        ("linear", 0): [0, 1, 2, -1, -1, -1, -1, -1, -1, -1],
        ("linear", 1): [-1, -1, -1, 0, 1, 2, -1, -1, -1, -1],
        ("linear", 3): [-1, -1, -1, -1, -1, -1, -1, -1, 0, 1],
        ("round-robin", 1): [-1, 0, -1, -1, -1, 1, -1, -1, -1, 2],
        ("round-robin", 3): [-1, -1, -1, 0, -1, -1, -1, 1, -1, -1],
    }
    for (placement, rank), expected in want.items():
        run("gen", "expert-map", "--global-experts", 10, "--ranks", 4, "--rank", rank, "--placement", placement,
            "-o", m, code=0)
        h, got = load_npy(m)
        expect(h["descr"] == "<i4" and h["shape"] == (10,), f"{placement} {rank}: {h}")
        expect(got == expected, f"{placement} rank {rank}: {got}, wanted {expected}")
    # Every global expert on exactly one rank, each rank's local ids 0..n-1.
    for placement in ["linear", "round-robin"]:
        owners = [0] * 256
        for rank in range(6):
            run("gen", "expert-map", "--global-experts", 256, "--ranks", 6, "--rank", rank, "--placement",
                placement, "-o", m, code=0)
            got = load_npy(m)[1]
            local = sorted(v for v in got if v >= 0)
            expect(local == list(range(len(local))) and len(local) in (42, 43), f"{placement} {rank}: {local}")
            for e, v in enumerate(got):
                owners[e] += v >= 0
        expect(owners == [1] * 256, f"{placement}: owners {owners}")
    # The map is what align takes, both semantics.
    run("gen", "expert-map", "--global-experts", 256, "--ranks", 4, "--rank", 2, "-o", m, code=0)
    run("align", "--topk-ids", TRACE, "-E", 64, "--expert-map", m, "--device", "cpu", code=0)
    run("align", "--topk-ids", TRACE, "-E", 256, "--expert-map", m, "--map-semantics", "vllm", "--device", "cpu",
        code=0)
    for bad in [["--ranks", 0], ["--ranks", 257], ["--ranks", 4, "--rank", 4], ["--ranks", 4, "--rank", -1]]:
        p = run("gen", "expert-map", "--global-experts", 256, *bad, "-o", os.path.join(d, "bad.npy"), code=2)
        expect(len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("moekit:"), p.stderr)
    expect(not os.path.exists(os.path.join(d, "bad.npy")), "a refused gen wrote a file")


@case()
def gen_load_counts_a_trace_per_layer():
    d = tmp()
    f = os.path.join(d, "loads.npy")
    T, K, E, L = 300, 4, 32, 5
    run("gen", "load", "--tokens", T, "--topk", K, "-E", E, "--layers", L, "--dist", "zipf:1.2", "-o", f, code=0)
    h, v = load_npy(f)
    expect(h["descr"] == "<i8" and h["shape"] == (L, E), f"{h}")
    rows = [v[l * E:(l + 1) * E] for l in range(L)]
    expect(all(sum(r) == T * K and min(r) >= 0 and max(r) <= T for r in rows), f"{rows}")
    expect(len({tuple(r) for r in rows}) == L, f"zipf layers should differ (own seed each): {rows}")
    # hot:1: every token routes to expert 0 (a second formulation of the counts).
    run("gen", "load", "--tokens", T, "--topk", K, "-E", E, "--dist", "hot:1", "-o", f, code=0)
    h, v = load_npy(f)
    expect(h["shape"] == (1, E) and v[0] == T and sum(v) == T * K, f"{h} {v}")
    # What --dist load: takes, per layer.
    run("gen", "load", "--tokens", T, "--topk", K, "-E", E, "--layers", L, "-o", f, code=0)
    run("gen", "align", "--tokens", 64, "--topk", K, "-E", E, "--dist", f"load:{f}:{L - 1}", "-o",
        os.path.join(d, "t.npy"), code=0)
    p = run("gen", "load", "--tokens", T, "--topk", K, "-E", E, "--layers", 0, "-o", os.path.join(d, "x.npy"), code=2)
    expect("--layers" in p.stderr, p.stderr)


@case()
def data_samples_are_what_data_readme_says():
    # The JSON samples hold DeepSeek-V2-Lite's first prompt (33 tokens, 26 MoE layers, top-6 of 64):
    # both import to the same layers, and MoE layer index 12 is the recorded layer-13 slice's first rows.
    _, l13 = load_npy(os.path.join(DATA, "deepseek_v2_lite_l13_prefill1024.npy"))
    d = tmp()
    for name, extra in [("deepseek_v2_lite_prompt0_vllm.json", []),
                        ("deepseek_v2_lite_prompt0_sglang.json", ["--layers", 26, "--topk", 6])]:
        out = os.path.join(d, name)
        run("trace", "import", "json", os.path.join(DATA, name), "-o", out, "-E", 64, *extra, code=0)
        expect(sorted(os.listdir(out)) == sorted(f"layer{i}.npy" for i in range(26)), f"{name}: {os.listdir(out)}")
        h, ids = load_npy(os.path.join(out, "layer12.npy"))
        expect(h["shape"] == (33, 6) and ids == l13[:33 * 6], f"{name}: layer12 {h} differs from the recorded slice")
    # The recorded DeepSeek-V3 load: [61 layers, 256 experts], the three dense layers zero, 4096-token inputs x 8.
    h, load = load_npy(os.path.join(DATA, "deepseek_v3_load_prefill4096.npy"))
    expect(h["descr"] == "<i8" and h["shape"] == (61, 256), f"{h}")
    rows = [sum(load[l * 256:(l + 1) * 256]) for l in range(61)]
    expect(rows[:3] == [0, 0, 0] and len(set(rows[3:])) == 1 and rows[3] % (4096 * 8) == 0, f"layer sums {rows}")
