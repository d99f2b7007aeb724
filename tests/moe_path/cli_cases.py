"""CLI cases of the moe-path family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own, checked
against the independent float64 model below.
"""
import json
import math
import os
import struct

from cli_harness import DATA, case, expect, has_gpu, load_npy, run, save_npy, tmp, SKIP


COMMAND = "moe-path"
SMALL_ARGS = ["--tokens", 3, "--topk", 2, "-E", 8, "--hidden-size", 16]
# DeepSeek-V3's router on the bundled logits; the hidden rows are generated (data/ stays small).
BUNDLED_ARGS = ["--logits", os.path.join(DATA, "route_logits_64x256.npy"), "--topk", 8, "--scoring", "sigmoid",
                "--correction-bias", os.path.join(DATA, "route_bias_256.npy"), "--num-groups", 8,
                "--topk-groups", 4, "--renormalize", "--routed-scaling-factor", 2.5, "--hidden-size", 1030,
                "-B", 16]
OVERSIZED = [
    (["gen", "moe-path", "--tokens", 1 << 40, "--hidden-size", 1 << 20, "-o", "{out}"], "too large"),
    (["moe-path", "--tokens", 1 << 40, "--model", "deepseek-v3", "--device", "cpu"], "too large"),
    (["moe-path", "--tokens", 1 << 28, "--topk", 8, "-E", 256, "--hidden-size", 1 << 20, "--device", "cpu"],
     "too large"),
]


def softmax_topk(row, k, renorm):
    """ids and weights of one softmax router row (docs/route.md), float64, ties to the lower index."""
    m = max(row)
    e = [math.exp(x - m) for x in row]
    s = [v / sum(e) for v in e]
    ids = sorted(range(len(row)), key=lambda i: (-s[i], i))[:k]
    w = [s[i] for i in ids]
    return ids, [x / sum(w) if renorm else x for x in w]


def files(d, T=5, E=8, H=6):
    lg = os.path.join(d, "logits.npy")
    hid = os.path.join(d, "hidden.npy")
    save_npy(lg, "<f4", (T, E), [(((i + 1) * 2654435761) % 10007) / 1000.0 - 5.0 for i in range(T * E)])
    save_npy(hid, "<f4", (T, H), [((i * 37) % 23 - 11) / 8.0 for i in range(T * H)])
    return lg, hid, load_npy(lg)[1], load_npy(hid)[1]


def json_of(p):
    return json.loads(p.stdout.splitlines()[-1])


@case()
def moe_path_cpu_matches_model():
    d = tmp()
    T, E, H, K, S = 5, 8, 6, 3, 2.0
    lg, hid, lv, hv = files(d, T, E, H)
    for layout in ("padded", "compact"):
        out = os.path.join(d, layout)
        p = run("moe-path", "--logits", lg, "--hidden", hid, "--topk", K, "--renormalize", "--routed-scaling-factor",
                S, "--layout", layout, "-B", 4, "--device", "cpu", "--out", out, "--format", "json", code=0)
        o = json_of(p)
        expect(o["check"]["result"] == "pass" and o["params"]["routed"] == "yes" and o["pdl"] == "n/a", o)
        expect(sorted(os.listdir(out)) == ["out.npy", "topk_ids.npy", "topk_weights.npy"], os.listdir(out))
        ids = load_npy(os.path.join(out, "topk_ids.npy"))[1]
        w = load_npy(os.path.join(out, "topk_weights.npy"))[1]
        ho, ov = load_npy(os.path.join(out, "out.npy"))
        expect(ho["shape"] == (T, H) and ho["descr"] == "<f4", f"{ho}")
        for t in range(T):
            mi, mw = softmax_topk(lv[t * E:(t + 1) * E], K, True)
            expect(ids[t * K:(t + 1) * K] == mi, f"token {t}: ids {ids[t * K:(t + 1) * K]} vs {mi}")
            for j in range(K):  # the weights before S (combine applies S)
                expect(abs(w[t * K + j] - mw[j]) <= 1e-6 * mw[j], f"token {t}: w {w[t * K + j]} vs {mw[j]}")
            for c in range(H):
                want = S * sum(mw) * hv[t * H + c]
                got = ov[t * H + c]
                expect(abs(got - want) <= 1e-5 * abs(want) + 1e-30, f"out[{t},{c}] = {got}, want {want}")


@case()
def moe_path_given_ids_and_bf16():
    d = tmp()
    T, K, E, H = 4, 2, 5, 8
    ids = os.path.join(d, "ids.npy")
    w = os.path.join(d, "w.npy")
    hid = os.path.join(d, "h.npy")
    save_npy(ids, "<i8", (T, K), [(t + 2 * j) % E for t in range(T) for j in range(K)])
    save_npy(w, "<f4", (T, K), [0.25, 0.5] * T)
    bf = [0x3f80 + i for i in range(T * H)]  # bf16 bit patterns 1.0, 1.0078125, ...
    save_npy(hid, "<u2", (T, H), bf)
    out = os.path.join(d, "o")
    p = run("moe-path", "--topk-ids", ids, "--topk-weights", w, "--hidden", hid, "--dtype", "bf16", "-E", E,
            "--routed-scaling-factor", 2, "--device", "cpu", "--out", out, "--format", "json", code=0)
    o = json_of(p)
    expect(o["params"]["routed"] == "no" and o["params"]["scoring"] is None and o["dtype"] == "bfloat16", o)
    expect(sorted(os.listdir(out)) == ["out.npy"], os.listdir(out))
    ho, ov = load_npy(os.path.join(out, "out.npy"))
    expect(ho["shape"] == (T, H), f"{ho}")
    # 2 * (0.25 + 0.5) * x = 1.5 x, rounded to bf16 once
    for i, b in enumerate(bf):
        x = struct.unpack("<f", struct.pack("<I", b << 16))[0]
        got = struct.unpack("<f", struct.pack("<I", ov[i] << 16))[0]
        expect(abs(got - 1.5 * x) <= 2 ** -7 * 1.5 * x, f"out {i}: {got} vs {1.5 * x}")
    p = run("moe-path", "--topk-ids", ids, "--topk-weights", w, "-E", E, "--hidden-size", 8, "--device", "cpu",
            code=0)  # hidden generated, T from the ids
    expect("generated hidden 4 x 8" in p.stdout, p.stdout)


@case()
def moe_path_takes_gen_topk_weights():
    # combine's weight generator feeds moe-path's --topk-weights too.
    d = tmp()
    ids, w = os.path.join(d, "ids.npy"), os.path.join(d, "w.npy")
    run("gen", "align", "--tokens", 6, "--topk", 2, "-E", 16, "-o", ids, code=0)
    run("gen", "topk-weights", "--tokens", 6, "--topk", 2, "-o", w, code=0)
    run("moe-path", "--topk-ids", ids, "--topk-weights", w, "-E", 16, "--hidden-size", 8, "--device", "cpu", code=0)


@case()
def moe_path_model_presets():
    def params(*args):
        p = run("moe-path", "--tokens", 3, *args, "--device", "cpu", "--format", "json", code=0)
        return json_of(p)["params"]
    pm = params("--model", "deepseek-v3", "--hidden-size", 64)
    expect(pm["experts"] == 256 and pm["topk"] == 8 and pm["groups"] == 8 and pm["topk_groups"] == 4
           and pm["scoring"] == "sigmoid" and pm["bias"] == "yes" and pm["renormalize"] == "yes"
           and pm["scaling"] == 2.5 and pm["hidden"] == 64 and pm["model"] == "deepseek-v3", pm)
    pm = params("--model", "qwen3-235b", "--hidden-size", 32)
    expect(pm["experts"] == 128 and pm["topk"] == 8 and pm["scoring"] == "softmax" and pm["groups"] == 1
           and pm["bias"] == "no" and pm["renormalize"] == "yes" and pm["scaling"] == 1, pm)
    pm = params("--model", "mixtral", "--hidden-size", 32, "--no-renormalize", "-k", 1)
    expect(pm["experts"] == 8 and pm["topk"] == 1 and pm["renormalize"] == "no", pm)
    pm = params("--model", "deepseek-v3", "-E", 64, "--hidden-size", 8, "--routed-scaling-factor", 1)
    expect(pm["experts"] == 64 and pm["groups"] == 8 and pm["scaling"] == 1, pm)
    pm = params("-E", 16, "-k", 4, "--hidden-size", 8)
    expect(pm["model"] is None and pm["renormalize"] == "no" and pm["hidden"] == 8, pm)
    # the default H is the model's
    p = run("moe-path", "--tokens", 1, "--model", "mixtral", "--device", "cpu", "--format", "json", code=0)
    expect(json_of(p)["params"]["hidden"] == 4096, p.stdout)
    d = tmp()
    lg, _, _, _ = files(d, 2, 8, 4)
    p = run("moe-path", "--logits", lg, "--model", "qwen3-235b", "--device", "cpu", code=2)
    expect("--model qwen3-235b's E is 128" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    run("moe-path", "--logits", lg, "--model", "mixtral", "--hidden-size", 8, "--device", "cpu", code=0)


@case()
def moe_path_bad_input_exits_2():
    d = tmp()
    lg, hid, _, _ = files(d, 5, 8, 6)
    ids = os.path.join(d, "ids.npy")
    w = os.path.join(d, "w.npy")
    save_npy(ids, "<i4", (5, 2), [0, 1, 2, 3, 4, 5, 6, 7, 0, 9])  # 9 >= E = 8
    save_npy(w, "<f4", (5, 2), [0.5] * 10)

    def refused(*args, word=None):
        p = run("moe-path", *args, "--device", "cpu", code=2)
        expect(len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("moekit: "), p.stderr)
        if word:
            expect(word in p.stderr, f"{word!r} not in {p.stderr!r}")

    refused("--topk-ids", ids, "--topk-weights", w, "-E", 8, word="outside [0, 8)")
    refused("--topk-ids", ids, "-E", 10)  # weights missing
    refused("--logits", lg, "--topk-ids", ids, "--topk-weights", w, "-E", 10)  # both inputs
    refused("--topk-ids", ids, "--topk-weights", w, "-E", 10, "--scoring", "sigmoid")  # routing option, no routing
    refused("--topk-ids", ids, "--topk-weights", w, "-E", 10, "--topk", 3, word="--topk is 3")
    refused("--topk-ids", ids, "--topk-weights", w, "--hidden-size", 4, word="--num-experts")
    short = os.path.join(d, "short.npy")
    save_npy(short, "<f4", (4, 2), [0.5] * 8)
    refused("--topk-ids", ids, "--topk-weights", short, "-E", 10, word="float32 [5, 2]")
    save_npy(short, "<f4", (4, 6), [0.5] * 24)
    refused("--logits", lg, "--hidden", short, "--topk", 2, word="4 rows")
    nan = os.path.join(d, "nan.npy")
    save_npy(nan, "<f4", (5, 6), [0.0] * 29 + [float("nan")])
    refused("--logits", lg, "--hidden", nan, "--topk", 2, word="hidden[4, 5]")
    refused("--logits", lg, "--hidden", hid, word="--topk")  # no K to route with
    refused("--logits", lg, "--hidden", hid, "--topk", 2, "--num-groups", 3, word="does not divide")
    refused("--logits", lg, "--hidden", hid, "--topk", 2, "--routed-scaling-factor", "inf")
    refused("-E", 8, "--topk", 2, word="--tokens")  # no input at all
    refused("--logits", lg, "--hidden", hid, "--topk", 2, "--tokens", 3)  # files and --tokens


@case()
def moe_path_zero_tokens_and_gen():
    d = tmp()
    lg, hid, _, _ = files(d, 0, 8, 6)
    out = os.path.join(d, "o")
    run("moe-path", "--logits", lg, "--hidden", hid, "--topk", 2, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "out.npy"))[0]["shape"] == (0, 6), "T = 0")
    expect(load_npy(os.path.join(out, "topk_ids.npy"))[0]["shape"] == (0, 2), "T = 0 ids")
    g = os.path.join(d, "g.npy")
    run("gen", "moe-path", "--tokens", 3, "--hidden-size", 7, "--dtype", "f16", "-o", g, code=0)
    expect(load_npy(g)[0]["shape"] == (3, 7), "gen shape")


@case()
def moe_path_cpu_report_has_no_stage_times():
    p = run("moe-path", *SMALL_ARGS, "--device", "cpu", "--bench", "--iters", 3, "--format", "json", code=0)
    o = json_of(p)
    expect("stage_us" in o and o["stage_us"] is None and o["time_us"]["median"] > 0, o)
    p = run("moe-path", *SMALL_ARGS, "--device", "cpu", "--bench", "--iters", 3, "--format", "csv", code=0)
    expect("stage_" not in p.stdout, p.stdout)


@case("gpu")
def moe_path_gpu_stage_times_and_pdl():
    if not has_gpu():
        return SKIP
    for pdl in ("on", "off"):
        p = run("moe-path", "--model", "deepseek-v3", "--tokens", 4, "--hidden-size", 1024, "--pdl", pdl, "--bench",
                "--iters", 20, "--device", "gpu", "--format", "json", code=0)
        o = json_of(p)
        expect(o["check"]["result"] == "pass" and o["check"]["error_unit"] == "ulp", o["check"])
        st = o["stage_us"]
        expect(list(st) == ["route", "permute", "combine", "sum"], st)
        s = sum(st[k]["median"] for k in ("route", "permute", "combine"))
        expect(abs(st["sum"]["median"] - s) <= 1e-3 * s and all(st[k]["median"] > 0 for k in st), st)
        caps_pdl = o["pdl"]
        expect(caps_pdl in ("on", "off") and "pdl" not in o["params"], o)
        if pdl == "off":
            expect(caps_pdl == "off", o)
    p = run("moe-path", "--model", "mixtral", "--tokens", 4, "--hidden-size", 256, "--bench", "--iters", 10,
            "--device", "gpu", code=0)
    for line in ("stage_us route:", "stage_us permute:", "stage_us combine:", "stage_us sum:", "check: pass"):
        expect(line in p.stdout, p.stdout)
    p = run("moe-path", "--model", "mixtral", "--tokens", 4, "--hidden-size", 256, "--bench", "--iters", 10,
            "--device", "gpu", "--format", "csv", code=0)
    expect("stage_route_us" in p.stdout and "stage_sum_us" in p.stdout, p.stdout)


@case()
def moe_path_renormalize_all_zero_sigmoid_scores():
    # The route stage's weights on logits of -1000 with sigmoid + renormalize:
    # 0/0 made them NaN (exit 0, and with --out the file check failed on
    # NaN != NaN). They stay 0, so every output row is 0 (docs/route.md).
    d = tmp()
    T, E, K, H = 3, 8, 2, 16
    f = os.path.join(d, "low.npy")
    save_npy(f, "<f4", (T, E), [-1000.0] * (T * E))
    out = os.path.join(d, "o")
    p = run("moe-path", "--logits", f, "--topk", K, "--scoring", "sigmoid", "--renormalize", "--hidden-size", H,
            "--gen-dtype", "f32", "--device", "cpu", "--out", out, "--format", "json", code=0)
    o = json.loads(p.stdout)
    expect(o["check"]["result"] != "fail", o["check"])
    _, w = load_npy(os.path.join(out, "topk_weights.npy"))
    expect(w == [0.0] * (T * K), f"weights {w}")
    _, y = load_npy(os.path.join(out, "out.npy"))
    expect(all(v == 0.0 for v in y), f"out {y[:8]}")


# ---- the expert FFN (--experts ffn) --------------------------------------------

def bf16_round(x):
    """x rounded to bfloat16 (8 significant bits, to nearest even), as a float."""
    if x == 0:
        return 0.0
    m, e = math.frexp(x)  # x = m * 2^e, 0.5 <= |m| < 1
    return round(m * 256) * 2.0 ** (e - 8)


def bf16_bits(v):
    """bf16 bits of a value bfloat16 represents exactly."""
    b = struct.unpack("<I", struct.pack("<f", v))[0]
    assert b & 0xFFFF == 0, v
    return b >> 16


def bf16_value(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def ffn_files(d, T=4, K=2, E=3, H=8, I=4):
    """Given ids, weights, bf16 hidden rows and W1 [E, 2I, H], W2 [E, H, I] of small dyadic values
    (exact in bf16 and in every double sum)."""
    ids = [(t + 2 * j) % E for t in range(T) for j in range(K)]
    w = [0.75 if j == 0 else -0.25 for t in range(T) for j in range(K)]
    x = [((i * 13) % 11 - 5) / 8.0 for i in range(T * H)]
    w1 = [((i * 37) % 17 - 8) / 16.0 for i in range(E * 2 * I * H)]
    w2 = [((i * 29) % 13 - 6) / 16.0 for i in range(E * H * I)]
    paths = {n: os.path.join(d, n + ".npy") for n in ("ids", "w", "x", "w1", "w2")}
    save_npy(paths["ids"], "<i4", (T, K), ids)
    save_npy(paths["w"], "<f4", (T, K), w)
    save_npy(paths["x"], "<u2", (T, H), [bf16_bits(v) for v in x])
    save_npy(paths["w1"], "<u2", (E, 2 * I, H), [bf16_bits(v) for v in w1])
    save_npy(paths["w2"], "<u2", (E, H, I), [bf16_bits(v) for v in w2])
    return paths, (ids, w, x, w1, w2)


def ffn_model(vals, T, K, E, H, I, S, interleaved):
    """out [T, H] of docs/experts.md's formula in float64, h, a and y rounded to bf16 where the GPU rounds
    them; the bound each element is checked within (2 ULPs of the weighted sum's magnitude)."""
    ids, w, x, w1, w2 = vals
    out, bound = [], []
    for t in range(T):
        acc, mag = [0.0] * H, [0.0] * H
        for j in range(K):
            e = ids[t * K + j]
            a = []
            for i in range(I):
                gr, ur = (2 * i, 2 * i + 1) if interleaved else (i, I + i)
                g = bf16_round(sum(x[t * H + c] * w1[(e * 2 * I + gr) * H + c] for c in range(H)))
                u = bf16_round(sum(x[t * H + c] * w1[(e * 2 * I + ur) * H + c] for c in range(H)))
                a.append(bf16_round(g / (1 + math.exp(-g)) * u))
            for c in range(H):
                y = bf16_round(sum(a[i] * w2[(e * H + c) * I + i] for i in range(I)))
                acc[c] += w[t * K + j] * y
                mag[c] += abs(w[t * K + j] * y)
        for c in range(H):
            out.append(S * acc[c])
            bound.append(2 * 2 ** -7 * abs(S) * mag[c] + 1e-30)
    return out, bound


@case()
def moe_path_ffn_cpu_matches_model():
    d = tmp()
    T, K, E, H, I, S = 4, 2, 3, 8, 4, 2.0
    f, vals = ffn_files(d, T, K, E, H, I)
    outs = {}
    for layout in ("gate-up", "interleaved"):
        out = os.path.join(d, layout)
        p = run("moe-path", "--experts", "ffn", "--topk-ids", f["ids"], "--topk-weights", f["w"], "--hidden", f["x"],
                "--w1", f["w1"], "--w2", f["w2"], "--dtype", "bf16", "-E", E, "--w1-layout", layout,
                "--routed-scaling-factor", S, "--layout", "compact", "--device", "cpu", "--out", out, "--format",
                "json", code=0)
        o = json_of(p)
        pm = o["params"]
        expect(o["check"]["result"] == "pass" and pm["expert_ffn"] == "yes" and pm["inter"] == I
               and pm["act"] == "silu" and pm["w1_layout"] == layout and pm["expert_weights"] == "given", o)
        expect(sorted(os.listdir(out)) == ["out.npy"], os.listdir(out))
        ho, ov = load_npy(os.path.join(out, "out.npy"))
        expect(ho["shape"] == (T, H) and ho["descr"] in ("<V2", "|V2", "<u2"), f"{ho}")
        want, bound = ffn_model(vals, T, K, E, H, I, S, layout == "interleaved")
        for i in range(T * H):
            got = bf16_value(ov[i])
            expect(abs(got - want[i]) <= bound[i], f"{layout}: out[{i // H}, {i % H}] = {got}, model {want[i]}")
        outs[layout] = ov
    # the layouts read W1 differently: the model's difference shows in the output
    expect(outs["gate-up"] != outs["interleaved"], "gate-up and interleaved W1 gave the same output")


@case()
def moe_path_ffn_presets_generated_weights_and_zero_tokens():
    def report(*args):  # the written out.npy read back and checked against the reference
        return json_of(run("moe-path", "--experts", "ffn", *args, "--device", "cpu", "--out", os.path.join(tmp(), "o"),
                           "--format", "json", code=0))
    for model, E, K, I in (("deepseek-v3-tp8", 256, 8, 256), ("deepseek-v3", 256, 8, 2048), ("qwen3-235b", 128, 8, 1536),
                           ("mixtral", 8, 2, 14336)):
        o = report("--model", model, "--tokens", 1, "--hidden-size", 16)
        pm = o["params"]
        expect(o["check"]["result"] == "pass" and pm["experts"] == E and pm["topk"] == K and pm["inter"] == I
               and pm["expert_weights"] == "generated" and pm["model"] == model, o)
        expect(any("expert weights W1" in n for n in o["notes"]), o["notes"])
    o = report("--model", "mixtral", "--tokens", 2, "--hidden-size", 16, "--inter-size", 24, "--act", "gelu-tanh")
    expect(o["params"]["inter"] == 24 and o["params"]["act"] == "gelu-tanh", o["params"])
    o = report("--model", "deepseek-v3-tp8", "--tokens", 2, "--hidden-size", 16, "--act", "swiglu-oai", "--w1-layout",
               "interleaved", "--gen-dtype", "f16")
    expect(o["dtype"] == "float16" and o["check"]["result"] == "pass", o)
    # identity runs report what they always did: no FFN parameters
    p = run("moe-path", "--model", "deepseek-v3-tp8", "--tokens", 1, "--hidden-size", 16, "--device", "cpu", "--format",
            "json", code=0)
    pm = json_of(p)["params"]
    expect("inter" not in pm and "expert_ffn" not in pm and pm["experts"] == 256, pm)
    d = tmp()
    out = os.path.join(d, "o")
    run("moe-path", "--experts", "ffn", "--tokens", 0, "-E", 8, "-k", 2, "--hidden-size", 16, "--inter-size", 8,
        "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "out.npy"))[0]["shape"] == (0, 16), "T = 0")


@case()
def moe_path_ffn_given_weights_equal_generated_ones():
    # gen experts-weights writes what a run without --w1/--w2 generates for the same seed: the reference
    # reading the files and the one recomputing the generator agree bit for bit, routed and not.
    d = tmp()
    w1, w2 = os.path.join(d, "w1.npy"), os.path.join(d, "w2.npy")
    for which, path in (("w1", w1), ("w2", w2)):
        run("gen", "experts-weights", "--which", which, "-E", 8, "--hidden-size", 24, "--inter-size", 16, "--seed", 5,
            "-o", path, code=0)
    for layout in ("padded", "compact"):
        outs = []
        for weights in (["--w1", w1, "--w2", w2], ["--inter-size", 16]):
            out = os.path.join(d, layout + str(len(outs)))
            p = run("moe-path", "--experts", "ffn", "--tokens", 9, "-E", 8, "-k", 3, "--hidden-size", 24, *weights,
                    "--seed", 5, "--layout", layout, "--device", "cpu", "--out", out, "--format", "json", code=0)
            expect(json_of(p)["check"]["result"] == "pass", p.stdout)
            with open(os.path.join(out, "out.npy"), "rb") as fh:
                outs.append(fh.read())
        expect(outs[0] == outs[1], f"{layout}: out.npy differs between given and generated weights")


@case()
def moe_path_ffn_bad_input_exits_2():
    d = tmp()
    f, _ = ffn_files(d)
    given = ["--topk-ids", f["ids"], "--topk-weights", f["w"], "--hidden", f["x"], "--dtype", "bf16", "-E", 3]

    def refused(*args, word=None):
        p = run("moe-path", *args, "--device", "cpu", code=2)
        expect(len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("moekit: "), p.stderr)
        if word:
            expect(word in p.stderr, f"{word!r} not in {p.stderr!r}")

    # the FFN's options with identity experts are refused, not ignored
    refused(*SMALL_ARGS, "--inter-size", 8, word="--inter-size applies to the expert FFN")
    refused(*SMALL_ARGS, "--act", "gelu", word="--act applies to the expert FFN")
    refused(*SMALL_ARGS, "--w1-layout", "interleaved", word="--w1-layout applies")
    refused(*given, "--w1", f["w1"], "--w2", f["w2"], word="--w1 applies")
    refused(*SMALL_ARGS, "--experts", "ffn", word="intermediate size")
    refused(*SMALL_ARGS, "--experts", "ffn", "--inter-size", 0, word="--inter-size must be >= 1")
    refused(*SMALL_ARGS, "--experts", "ffn", "--inter-size", 8, "--gen-dtype", "f32", word="bf16 or f16")
    refused(*SMALL_ARGS, "--experts", "gemm")
    refused(*SMALL_ARGS, "--experts", "ffn", "--inter-size", 8, "--act", "swiglu-oai", word="interleaved")
    f32 = os.path.join(d, "x32.npy")
    save_npy(f32, "<f4", (4, 8), [0.5] * 32)
    refused("--topk-ids", f["ids"], "--topk-weights", f["w"], "--hidden", f32, "-E", 3, "--experts", "ffn",
            "--inter-size", 4, word="x32.npy: --experts ffn takes bf16 or f16")
    ffn = given + ["--experts", "ffn"]
    refused(*ffn, "--w1", f["w1"])  # --w2 missing
    refused(*ffn, "--w1", f["w1"], "--w2", f["w2"], "--inter-size", 4, word="excludes")  # I is W1's
    refused(*ffn, "--w1", f["w2"], "--w2", f["w2"], word="W1 must be [E, 2I, H] = [3, 2I, 8]")
    refused(*ffn, "--w1", f["w1"], "--w2", f["w1"], word="W2 must be [E, H, I] = [3, 8, 4]")
    odd = os.path.join(d, "odd.npy")
    save_npy(odd, "<u2", (3, 7, 8), [0x3f80] * (3 * 7 * 8))
    refused(*ffn, "--w1", odd, "--w2", f["w2"], word="W1 must be")
    wide = os.path.join(d, "w1_f32.npy")
    save_npy(wide, "<f4", (3, 8, 8), [0.5] * (3 * 8 * 8))
    refused(*ffn, "--w1", wide, "--w2", f["w2"], word="cannot reinterpret")  # --dtype bf16 on 4-byte data
    refused("--topk-ids", f["ids"], "--topk-weights", f["w"], "-E", 3, "--hidden-size", 8, "--gen-dtype", "f16",
            "--experts", "ffn", "--w1", f["w1"], "--w2", f["w2"], word="must be float16 like the hidden states, got uint16")
    nan = os.path.join(d, "w2_nan.npy")
    save_npy(nan, "<u2", (3, 8, 4), [0x3f80] * (3 * 8 * 4 - 1) + [0x7fc1])
    refused(*ffn, "--w1", f["w1"], "--w2", nan, word="element [2, 7, 3] is nan")
    # the CPU reference computes every token's FFN: over its limit, refused before any work
    refused("--model", "deepseek-v3", "--experts", "ffn", "--tokens", 64, word="over the CPU limit")


@case("gpu")
def moe_path_gpu_ffn_stage_times_and_check():
    """Stage times with the FFN: permute and combine drop out exactly when the experts pick lists its own
    slots (`fused`, sm_90's auto at few slots: its note names it); 400 slots are past fused's limit on
    every GPU, so the path keeps all its stages."""
    if not has_gpu():
        return SKIP
    for pdl, T in (("on", 4), ("off", 4), ("on", 200)):
        p = run("moe-path", "--experts", "ffn", "--model", "mixtral", "--tokens", T, "--hidden-size", 256,
                "--inter-size", 128, "--pdl", pdl, "--bench", "--iters", 10, "--device", "gpu", "--format", "json",
                code=0)
        o = json_of(p)
        expect(o["check"]["result"] == "pass" and o["check"]["error_unit"] == "bound", o["check"])
        st = o["stage_us"]
        picks = [n for n in o["notes"] if n.startswith("stages: ")]
        expect(len(picks) == 1 and ", ffn " in picks[0], o["notes"])
        fused = ", ffn fused" in picks[0]
        expect(not (fused and T == 200), picks)
        want = ["route", "ffn", "sum"] if fused else ["route", "permute", "ffn", "combine", "sum"]
        expect(list(st) == want, (st, picks))
        expect(any(f"y of {T} of {T} token(s)" in n for n in o["notes"]) or T > 4, o["notes"])
    # DeepSeek-V3's TP8 shard at full size: 2.8 GB of weights generated on the device
    p = run("moe-path", "--experts", "ffn", "--model", "deepseek-v3-tp8", "--tokens", 1, "--device", "gpu",
            "--format", "json", code=0)
    o = json_of(p)
    expect(o["check"]["result"] == "pass" and o["params"]["inter"] == 256, o)
