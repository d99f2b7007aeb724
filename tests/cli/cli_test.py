#!/usr/bin/env python3
"""End-to-end tests of the moekit binary: exit codes, outputs, report fields.

Usage: cli_test.py MOEKIT DATA_DIR CASE   (CASE 'list' prints the case names)
Stdlib only: .npy files are read by a small independent parser below, so these
tests do not trust moekit's own reader. Exit 0 pass, 1 fail, 77 skip.
"""
import ast
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

MOEKIT, DATA = sys.argv[1], sys.argv[2]
CASES = {}
SKIP = 77


def case(suite="cpu"):
    def deco(f):
        CASES[f.__name__] = (suite, f)
        return f
    return deco


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def run(*args, code=None):
    p = subprocess.run([MOEKIT, *map(str, args)], capture_output=True, text=True, timeout=600)
    if code is not None and p.returncode != code:
        raise Fail(f"moekit {' '.join(map(str, args))}: exit {p.returncode}, wanted {code}\n"
                   f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def load_npy(path):
    """Minimal independent .npy reader (v1-3, little-endian numeric, C order)."""
    with open(path, "rb") as f:
        b = f.read()
    expect(b[:6] == b"\x93NUMPY", f"{path}: bad magic")
    major = b[6]
    if major == 1:
        hl, off = struct.unpack("<H", b[8:10])[0], 10
    else:
        hl, off = struct.unpack("<I", b[8:12])[0], 12
    hdr = ast.literal_eval(b[off:off + hl].decode("latin1"))
    data = b[off + hl:]
    expect((off + hl) % 64 == 0, f"{path}: data does not start at a multiple of 64")
    code = {"<i4": "i", "<i8": "q", "<f4": "f", "<f8": "d", "<u2": "H", "<f2": "e", "<V2": "H", "|V2": "H"}
    fmtc = code[hdr["descr"]]
    n = 1
    for s in hdr["shape"]:
        n *= s
    size = struct.calcsize(fmtc)
    expect(len(data) == n * size, f"{path}: {len(data)} data bytes for {n} elements")
    return hdr, list(struct.unpack(f"<{n}{fmtc}", data)) if n else []


def save_npy(path, descr, shape, values, version=1):
    fmtc = {"<i4": "i", "<i8": "q", "<f4": "f", "<u2": "H", "<i2": "h", "<f8": "d"}[descr]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pre = 10
    pad = 64 - (pre + len(hdr) + 1) % 64
    hdr = hdr + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack(f"<{len(values)}{fmtc}", *values))


def tmp():
    return tempfile.mkdtemp(prefix="moekit-cli-")


def has_gpu():
    p = run("info", "--format", "json", code=0)
    return json.loads(p.stdout.splitlines()[0]).get("device") is not None


TRACE = os.path.join(DATA, "trace_4096x8_e256.npy")


# ---------------------------------------------------------------- help, usage
@case()
def help_lists_commands():
    out = run("--help", code=0).stdout
    for sub in ["align", "dedup", "act-and-mul", "gen", "info", "variants", "Exit codes"]:
        expect(sub in out, f"--help does not mention {sub}")
    for sub in [["align"], ["dedup"], ["act-and-mul"], ["gen"], ["gen", "align"], ["gen", "dedup"],
                ["gen", "act-and-mul"], ["info"], ["variants"]]:
        o = run(*sub, "--help", code=0).stdout
        expect("--" in o or "Positionals" in o or "POSITIONALS" in o, f"{sub} --help is empty")
    o = run("align", "--help", code=0).stdout
    for opt in ["--variant", "--device", "--out", "--check", "--bench", "--warmup", "--iters", "--cold",
                "--graph", "--format", "--profile", "--seed", "--num-experts", "--block-size",
                "--expert-map", "--pad-sorted-ids", "--ignore-invalid"]:
        expect(opt in o, f"align --help lacks {opt}")


@case()
def usage_errors_exit_2():
    run(code=2)
    run("frobnicate", code=2)
    run("align", "--topk-ids", TRACE, code=2)  # --num-experts missing
    run("align", "--topk-ids", TRACE, "-E", "256", "--format", "xml", code=2)
    run("align", "--topk-ids", TRACE, "-E", "256", "--device", "tpu", code=2)
    run("align", "--topk-ids", TRACE, "-E", "256", "--iters", "0", code=2)


@case()
def variants_lists_every_op():
    out = run("variants", code=0).stdout
    for op in ["align", "dedup", "act-and-mul"]:
        expect(op in out, f"variants lacks {op}")
    lines = run("variants", "--format", "json", code=0).stdout.splitlines()
    ops = {json.loads(l)["op"] for l in lines}
    expect(ops == {"align", "dedup", "act-and-mul"}, f"json ops {ops}")
    for l in lines:
        o = json.loads(l)
        expect(o["variant"] and o["description"] and o["limits"], f"incomplete entry {o}")
    run("variants", "dedup", code=0)
    run("variants", "act_and_mul", code=0)
    run("variants", "nope", code=2)


# ---------------------------------------------------------------- gen + info
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
def gen_dedup_overlap_and_pad():
    d = tmp()
    f = os.path.join(d, "x.npy")
    run("gen", "dedup", "--batch", 3, "-M", 2, "--k", 100, "--max-index", 100000, "--overlap", 0.8,
        "--pad", 0.1, "-o", f, code=0)
    hdr, v = load_npy(f)
    expect(hdr["shape"] == (6, 100), f"shape {hdr['shape']}")
    for b in range(3):
        r0 = set(v[(2 * b) * 100:(2 * b + 1) * 100]) - {-1}
        r1 = set(v[(2 * b + 1) * 100:(2 * b + 2) * 100]) - {-1}
        expect(len(r0 & r1) >= 60, f"batch {b}: overlap {len(r0 & r1)} too small for 0.8")
    expect(v.count(-1) == 6 * 10, f"{v.count(-1)} pads, wanted 60")


@case()
def info_describes_files():
    out = run("info", TRACE, code=0).stdout
    expect("int32" in out and "4096" in out, f"info: {out}")
    run("info", os.path.join(tmp(), "missing.npy"), code=2)


# ---------------------------------------------------------------- align
def align_outputs(d):
    _, s = load_npy(os.path.join(d, "sorted_token_ids.npy"))
    _, e = load_npy(os.path.join(d, "expert_ids.npy"))
    _, n = load_npy(os.path.join(d, "num_tokens_post_pad.npy"))
    return s, e, n[0]


def align_model(ids, E, B, emap=None):
    """Independent model of the semantics (ascending slots within an expert)."""
    buckets = [[] for _ in range(E)]
    for i, g in enumerate(ids):
        e = g
        if emap is not None:
            e = emap[g] if 0 <= g < len(emap) else -1
        if 0 <= e < E:
            buckets[e].append(i)
    maxpad = len(ids) + E * (B - 1)
    s = [len(ids)] * maxpad
    eids = [-1] * ((maxpad + B - 1) // B)
    pos = 0
    for e in range(E):
        s[pos:pos + len(buckets[e])] = buckets[e]
        nb = (len(buckets[e]) + B - 1) // B
        for j in range(nb):
            eids[pos // B + j] = e
        pos += nb * B
    return s, eids, pos


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
    expect(o["params"]["numel"] == 400, f"{o['params']}")


# ---------------------------------------------------------------- dedup
def dedup_model(v, rows, k, M):
    out = []
    for b in range(rows // M):
        s = sorted({x for x in v[b * M * k:(b + 1) * M * k] if x >= 0})
        out += s + [-1] * (M * k - len(s))
    return out


@case()
def dedup_cpu_matches_model():
    d = tmp()
    f = os.path.join(d, "x.npy")
    run("gen", "dedup", "--batch", 5, "-M", 3, "--k", 77, "--max-index", 500, "--overlap", 0.5, "--pad", 0.2,
        "-o", f, code=0)
    out = os.path.join(d, "o")
    run("dedup", "--indices", f, "-M", 3, "--device", "cpu", "--out", out, code=0)
    hdr, got = load_npy(os.path.join(out, "dedup.npy"))
    _, v = load_npy(f)
    expect(hdr["shape"] == (5, 3 * 77), f"shape {hdr['shape']}")
    expect(got == dedup_model(v, 15, 77, 3), "dedup output differs from the model")
    # [bs, M, k] input gives the same answer
    save_npy(f, "<i4", (5, 3, 77), v)
    run("dedup", "--indices", f, "-M", 3, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "dedup.npy"))[1] == got, "3-D input")


@case()
def dedup_bad_inputs_exit_2():
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<i4", (5, 4), list(range(20)))
    p = run("dedup", "--indices", f, "-M", 2, "--device", "cpu", code=2)  # 5 rows, M=2
    expect("mtp-step" in p.stderr, p.stderr)
    p = run("dedup", "--indices", f, "-M", 5, "--max-index", 10, "--device", "cpu", code=2)
    expect("max-index" in p.stderr, p.stderr)
    run("dedup", "--indices", f, "-M", 5, "--max-index", 20, "--device", "cpu", code=0)
    save_npy(f, "<i8", (2, 2), [1, 2, 3, 4])
    run("dedup", "--indices", f, "-M", 1, "--device", "cpu", code=2)
    save_npy(f, "<i4", (4,), [1, 2, 3, 4])
    run("dedup", "--indices", f, "-M", 1, "--device", "cpu", code=2)
    save_npy(f, "<i4", (2, 3, 4), list(range(24)))
    run("dedup", "--indices", f, "-M", 2, "--device", "cpu", code=2)  # middle dim is 3


# ---------------------------------------------------------------- act-and-mul
def silu(x):
    return x / (1.0 + math.exp(-x)) if x > -700 else 0.0


@case()
def act_cpu_f32_matches_model():
    d = tmp()
    f = os.path.join(d, "x.npy")
    T, D = 7, 33
    vals = [((i * 7919) % 2001 - 1000) / 250.0 for i in range(T * 2 * D)]
    save_npy(f, "<f4", (T, 2 * D), vals)
    vals = load_npy(f)[1]  # rounded to f32
    out = os.path.join(d, "o")
    for act, fn in [("silu", silu), ("gelu", lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))))]:
        run("act-and-mul", "--input", f, "--activation", act, "--device", "cpu", "--out", out, code=0)
        hdr, got = load_npy(os.path.join(out, "out.npy"))
        expect(hdr["shape"] == (T, D) and hdr["descr"] == "<f4", f"{hdr}")
        for t in range(T):
            for j in range(D):
                want = fn(vals[t * 2 * D + j]) * vals[t * 2 * D + D + j]
                g = got[t * D + j]
                expect(abs(g - want) <= 1e-6 * abs(want) + 1e-30, f"{act} [{t},{j}] {g} vs {want}")


@case()
def act_bf16_reinterpret_and_errors():
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<i2", (2, 4), [0x3F80, 0x4000, 0x3F80, 0x4040, 0, 0, 0, 0])  # bf16 1,2 | 1,3
    out = os.path.join(d, "o")
    run("act-and-mul", "--input", f, "--device", "cpu", code=2)  # int16 without --dtype
    run("act-and-mul", "--input", f, "--dtype", "bf16", "--device", "cpu", "--out", out, code=0)
    hdr, got = load_npy(os.path.join(out, "out.npy"))
    expect(hdr["shape"] == (2, 2), f"{hdr}")
    save_npy(f, "<f4", (3, 5), [0.0] * 15)
    p = run("act-and-mul", "--input", f, "--device", "cpu", code=2)
    expect("2*d" in p.stderr, p.stderr)
    run("act-and-mul", "--input", f, "--activation", "relu", "--device", "cpu", code=2)


@case()
def act_alias_and_zero_tokens():
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<f4", (0, 8), [])
    out = os.path.join(d, "o")
    run("act_and_mul", "--input", f, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "out.npy"))[0]["shape"] == (0, 4), "0 tokens")


@case()
def outputs_are_atomic_no_temp_left():
    d = tmp()
    out = os.path.join(d, "o")
    run("dedup", "--batch", 2, "-M", 2, "--k", 16, "--device", "cpu", "--out", out, code=0)
    expect(os.listdir(out) == ["dedup.npy"], f"{os.listdir(out)}")
    blocker = os.path.join(d, "file")
    open(blocker, "w").close()
    p = run("dedup", "--batch", 2, "-M", 2, "--k", 16, "--device", "cpu", "--out", blocker, code=2)
    expect(blocker in p.stderr, p.stderr)


def limited_run(*args, mem_gb=2):
    """run() with the address space capped: a size check that regressed fails as
    'out of host memory' instead of eating the machine."""
    import resource

    def cap():
        lim = mem_gb << 30
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    return subprocess.run([MOEKIT, *map(str, args)], capture_output=True, text=True, timeout=120,
                          preexec_fn=cap)


@case()
def oversized_shapes_rejected_before_allocating():
    d = tmp()
    f = os.path.join(d, "x.npy")
    cases = [
        # (args, a word the one-line error must contain)
        (["gen", "align", "--tokens", 300000000, "--topk", 8, "-E", 256, "-o", f], "too large"),
        # numel fits int32 but numel + E*(B-1) does not: fail before generating 2e9 ids
        (["align", "--tokens", 260000000, "--topk", 8, "-E", 100000, "-B", 1024, "--device", "cpu"], "int32"),
        (["gen", "dedup", "--batch", 1, "-M", 4, "--k", 2000000000, "-o", f], "too large"),
        (["dedup", "--batch", 1, "-M", 4, "--k", 2000000000, "--device", "cpu"], "too large"),
        # 2*d overflows int64 when tokens is 0
        (["gen", "act-and-mul", "--tokens", 0, "--d", 1 << 62, "-o", f], "too large"),
        (["act-and-mul", "--tokens", 0, "--d", 1 << 62, "--device", "cpu"], "too large"),
    ]
    for args, word in cases:
        p = limited_run(*args)
        msg = f"moekit {' '.join(map(str, args))}: exit {p.returncode}, stderr {p.stderr!r}"
        expect(p.returncode == 2, msg)
        expect(word in p.stderr and "out of host memory" not in p.stderr, msg)
        expect(len(p.stderr.strip().splitlines()) == 1, msg)
    expect(not os.path.exists(f), "a rejected gen left a file behind")


@case()
def unknown_variant_is_exit_2_on_cpu_too():
    for args in [["align", "--topk-ids", TRACE, "-E", 256], ["dedup", "--batch", 2, "-M", 2, "--k", 8],
                 ["act-and-mul", "--tokens", 2, "--d", 8]]:
        p = run(*args, "--device", "cpu", "--variant", "no-such-variant", code=2)
        expect("no-such-variant" in p.stderr, p.stderr)
        run(*args, "--device", "cpu", "--variant", "auto", code=0)


# ---------------------------------------------------------------- GPU
def gpu_variants(op):
    lines = run("variants", op, "--format", "json", code=0).stdout.splitlines()
    return [json.loads(l)["variant"] for l in lines]


@case("gpu")
def gpu_every_variant_on_bundled_inputs():
    if not has_gpu():
        return SKIP
    inputs = {
        "align": ["--topk-ids", TRACE, "-E", 256, "-B", 128],
        "dedup": ["--indices", os.path.join(DATA, "dedup_bs115_m2_k2048.npy"), "-M", 2],
        "act-and-mul": ["--input", os.path.join(DATA, "act_64x2x1024_bf16.npy")],
    }
    for op, args in inputs.items():
        for v in gpu_variants(op):
            p = run(op, *args, "--variant", v, "--device", "gpu", "--format", "json")
            if p.returncode == 2 and "does not apply" in p.stderr:
                continue
            expect(p.returncode == 0, f"{op} {v}: exit {p.returncode}: {p.stderr}")
            o = json.loads(p.stdout)
            expect(o["check"]["result"] == "pass", f"{op} {v}: {o['check']}")
    p = run("align", *inputs["align"], "--bench", "--iters", 20, "--format", "json", "--profile", code=0)
    o = json.loads(p.stdout)
    expect(o["time_us"]["median"] > 0 and o["gbps"] > 0 and o["pct_of_peak"] is not None, f"{o}")


if __name__ == "__main__":
    name = sys.argv[3]
    if name == "list":
        for n, (suite, _) in CASES.items():
            print(f"{suite} {n}")
        sys.exit(0)
    try:
        rc = CASES[name][1]()
    except Fail as e:
        print(f"FAIL {name}: {e}")
        sys.exit(1)
    sys.exit(SKIP if rc == SKIP else 0)
