"""CLI cases of the experts family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own: CPU runs
against the float64 model below (written from docs/experts.md, not from the
reference), the generated inputs against the files `moekit gen` writes, the
W1 layouts and the expert map against each other, and the refusals.
"""
import json
import math
import os
import struct

from cli_harness import case, expect, has_gpu, load_npy, run, save_npy, tmp, SKIP


COMMAND = "experts"
SMALL_ARGS = ["--tokens", 3, "--topk", 2, "-E", 8, "--hidden-size", 16, "--inter-size", 8]
# GPU runs of every variant: DeepSeek-V3's routing, H and I off every tile size, a sampled check.
BUNDLED_ARGS = ["--model", "deepseek-v3", "--tokens", 64, "--hidden-size", 1030, "--inter-size", 200]
OVERSIZED = [
    (["gen", "experts", "--tokens", 1 << 40, "--hidden-size", 1 << 20, "-o", "{out}"], "too large"),
    (["gen", "experts-weights", "--which", "w1", "-E", 1 << 20, "--hidden-size", 1 << 20, "--inter-size", 1 << 20,
      "-o", "{out}"], "too large"),
    (["gen", "experts-weights", "--which", "w2", "-E", 256, "--hidden-size", 7168, "--inter-size", 2048, "-o", "{out}"],
     "host memory"),
    (["experts", "--tokens", 1 << 40, "--model", "deepseek-v3", "--device", "cpu"], "too large"),
    # A CPU run computes every token: DeepSeek-V3 at T = 4096 is 3.6e11 multiply-adds.
    (["experts", "--tokens", 4096, "--model", "deepseek-v3", "--device", "cpu"], "--device gpu"),
]


# ---- the model (docs/experts.md "Semantics"), float64 ------------------------

def bf16_round(v):
    """Round to the nearest bf16 (8 significant bits), ties to even (no subnormals or overflow here)."""
    if v == 0 or not math.isfinite(v):
        return v
    m, e = math.frexp(v)
    return round(m * 256) * 2.0 ** (e - 8)  # Python's round: half to even


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def bf16_bits(v):
    """bits of a value that is exactly a bf16"""
    b = struct.unpack("<I", struct.pack("<f", v))[0]
    expect(b & 0xFFFF == 0, f"{v} is not a bf16 value")
    return b >> 16


ALPHA = struct.unpack("<f", struct.pack("<f", 1.702))[0]  # the f32 constant


def act_mul(act, g, u):
    if act == "silu":
        return g / (1.0 + math.exp(-g)) * u
    if act == "gelu":
        return 0.5 * g * (1.0 + math.erf(g / math.sqrt(2.0))) * u
    if act == "gelu-tanh":
        return 0.5 * g * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g * g * g))) * u
    if act == "swiglu-noclamp":  # the tests' wrong formula
        return g / (1.0 + math.exp(-ALPHA * g)) * (u + 1.0)
    if act == "swiglu-oai":
        gc, uc = min(g, 7.0), min(max(u, -7.0), 7.0)
        return gc / (1.0 + math.exp(-ALPHA * gc)) * (uc + 1.0)
    raise ValueError(act)


def model(x, ids, w, w1, w2, T, K, E, H, I, act="silu", S=1.0, interleaved=False, emap=None):
    """out [T*H] and y {(t, j): [H]} of the kept slots, each intermediate rounded to bf16."""
    out, ys = [], {}
    for t in range(T):
        acc = [0.0] * H
        for j in range(K):
            gid = ids[t * K + j]
            e = gid if emap is None else (emap[gid] if 0 <= gid < len(emap) else -1)
            if not 0 <= e < E or (emap is None and not 0 <= gid < E):
                continue
            xr = x[t * H:(t + 1) * H]
            a = []
            for i in range(I):
                gr, ur = (2 * i, 2 * i + 1) if interleaved else (i, I + i)
                g = bf16_round(sum(xr[c] * w1[(e * 2 * I + gr) * H + c] for c in range(H)))
                u = bf16_round(sum(xr[c] * w1[(e * 2 * I + ur) * H + c] for c in range(H)))
                a.append(bf16_round(act_mul(act, g, u)))
            y = [bf16_round(sum(a[i] * w2[(e * H + h) * I + i] for i in range(I))) for h in range(H)]
            ys[(t, j)] = y
            for h in range(H):
                acc[h] += w[t * K + j] * y[h]
        out += [bf16_round(S * v) for v in acc]
    return out, ys


def ulp(v):
    m, e = math.frexp(abs(v) if v else 2.0 ** -126)
    return 2.0 ** (e - 8)


def inputs(d, T=4, K=2, E=3, H=8, I=4, ids=None):
    """Hidden, ids (one -1 and one id >= E: dropped), weights, W1, W2 of exact bf16 values
    whose dot products are exact in float64; large enough that swiglu-oai's clamps bite."""
    x = [((i * 7) % 9 - 4) / 4.0 for i in range(T * H)]
    w1 = [float((i * 5) % 11 - 5) for i in range(E * 2 * I * H)]
    w2 = [((i * 3) % 7 - 3) / 8.0 for i in range(E * H * I)]
    if ids is None:
        ids = [(t + 2 * j) % E for t in range(T) for j in range(K)]
        ids[1] = -1
        ids[2] = E + 5
    w = [0.25 + 0.125 * (i % 5) for i in range(T * K)]
    f = {n: os.path.join(d, n + ".npy") for n in ("x", "ids", "w", "w1", "w2")}
    save_npy(f["x"], "<u2", (T, H), [bf16_bits(v) for v in x])
    save_npy(f["ids"], "<i4", (T, K), ids)
    save_npy(f["w"], "<f4", (T, K), w)
    save_npy(f["w1"], "<u2", (E, 2 * I, H), [bf16_bits(v) for v in w1])
    save_npy(f["w2"], "<u2", (E, H, I), [bf16_bits(v) for v in w2])
    return f, dict(x=x, ids=ids, w=w, w1=w1, w2=w2, T=T, K=K, E=E, H=H, I=I)


def file_args(f):
    return ["--hidden", f["x"], "--topk-ids", f["ids"], "--topk-weights", f["w"], "--w1", f["w1"], "--w2", f["w2"],
            "--dtype", "bf16"]


def json_of(p):
    return json.loads(p.stdout.splitlines()[-1])


def same_files(a, b, name="out.npy"):
    with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
        return fa.read() == fb.read()


def one_line_refusal(p, word=None):
    expect(len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("moekit: "), p.stderr)
    if word is not None:
        expect(word in p.stderr, f"{word!r} not in {p.stderr!r}")


# ---- cases -------------------------------------------------------------------

@case()
def experts_cpu_matches_model():
    d = tmp()
    f, m = inputs(d)
    T, K, H = m["T"], m["K"], m["H"]
    for act, layout in (("silu", "compact"), ("gelu", "padded"), ("gelu-tanh", "compact")):
        out = os.path.join(d, act)
        p = run(COMMAND, *file_args(f), "--act", act, "--layout", layout, "-B", 4, "--routed-scaling-factor", 1.5,
                "--device", "cpu", "--out", out, "--format", "json", code=0)
        o = json_of(p)
        expect(o["check"]["result"] == "pass" and o["dtype"] == "bfloat16" and o["params"]["weights"] == "files", o)
        expect(o["summary"]["kept_slots"] == T * K - 2 and o["summary"]["active_experts"] == 3, o["summary"])
        expect(any("2 of 8 slots dropped" in n for n in o["notes"]), o["notes"])
        h, got = load_npy(os.path.join(out, "out.npy"))
        expect(h["shape"] == (T, H) and h["descr"] in ("<V2", "|V2"), h)
        want, _ = model(m["x"], m["ids"], m["w"], m["w1"], m["w2"], T, K, m["E"], H, m["I"], act=act, S=1.5)
        for i, (g, wv) in enumerate(zip(got, want)):
            # One bf16 ulp: a libm last bit may flip one rounding of a.
            expect(abs(bf16_value(g) - wv) <= ulp(wv), f"{act}: out[{i // H}, {i % H}] = {bf16_value(g)}, model {wv}")
        expect(any(v != 0 for v in want), "the model's output is all zero: the case checks nothing")


@case()
def experts_swiglu_oai_clamps_and_interleaved_rows():
    d = tmp()
    f, m = inputs(d)
    T, K, E, H, I = m["T"], m["K"], m["E"], m["H"], m["I"]
    # The same weights in interleaved order: gate i at row 2i, up i at row 2i + 1.
    inter = []
    for e in range(E):
        for i in range(I):
            for r in (i, I + i):
                inter += m["w1"][(e * 2 * I + r) * H:(e * 2 * I + r + 1) * H]
    f2 = dict(f, w1=os.path.join(d, "w1i.npy"))
    save_npy(f2["w1"], "<u2", (E, 2 * I, H), [bf16_bits(v) for v in inter])
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    run(COMMAND, *file_args(f), "--device", "cpu", "--out", a, code=0)
    run(COMMAND, *file_args(f2), "--w1-layout", "interleaved", "--device", "cpu", "--out", b, code=0)
    expect(same_files(a, b), "interleaved W1 rows gave another out than the same rows as gate-up")
    # gate-up rows read as interleaved are other weights: another out.
    c = os.path.join(d, "c")
    run(COMMAND, *file_args(f), "--w1-layout", "interleaved", "--device", "cpu", "--out", c, code=0)
    expect(not same_files(a, c), "--w1-layout changed nothing")
    # swiglu-oai against the model; the inputs reach |g|, |u| > 7, where the clamps bite.
    s = os.path.join(d, "s")
    run(COMMAND, *file_args(f2), "--w1-layout", "interleaved", "--act", "swiglu-oai", "--device", "cpu", "--out", s,
        code=0)
    _, got = load_npy(os.path.join(s, "out.npy"))
    want, _ = model(m["x"], m["ids"], m["w"], inter, m["w2"], T, K, E, H, I, act="swiglu-oai", interleaved=True)
    for i, (g, wv) in enumerate(zip(got, want)):
        expect(abs(bf16_value(g) - wv) <= ulp(wv), f"swiglu-oai: out[{i // H}, {i % H}] = {bf16_value(g)}, model {wv}")
    big = [abs(sum(m["x"][t * H + c] * m["w1"][r * H + c] for c in range(H))) for t in range(T) for r in range(2 * I)]
    expect(max(big) > 7, "no |g| or |u| above the clamp limit: the clamps are not exercised")
    # Without the clamps the model would differ: the comparison above sees them.
    loose, _ = model(m["x"], m["ids"], m["w"], inter, m["w2"], T, K, E, H, I, act="swiglu-noclamp", interleaved=True)
    expect(any(abs(bf16_value(g) - v) > ulp(v) for g, v in zip(got, loose)), "the clamps change nothing here")
    p = run(COMMAND, *file_args(f), "--act", "swiglu-oai", "--device", "cpu", code=2)
    one_line_refusal(p, "--w1-layout interleaved")


@case()
def experts_keep_intermediate_y_and_inverse():
    d = tmp()
    f, m = inputs(d)
    T, K, E, H, I = m["T"], m["K"], m["E"], m["H"], m["I"]
    _, ys = model(m["x"], m["ids"], m["w"], m["w1"], m["w2"], T, K, E, H, I)
    for layout in ("compact", "padded"):
        out = os.path.join(d, layout)
        run(COMMAND, *file_args(f), "--layout", layout, "-B", 4, "--keep-intermediate", "--device", "cpu", "--out",
            out, code=0)
        expect(sorted(os.listdir(out)) == ["inverse.npy", "out.npy", "y.npy"], os.listdir(out))
        hi, inv = load_npy(os.path.join(out, "inverse.npy"))
        hy, y = load_npy(os.path.join(out, "y.npy"))
        expect(hi["shape"] == (T, K) and hi["descr"] == "<i4" and hy["shape"][1] == H, (hi, hy))
        rows = hy["shape"][0]
        used = set()
        for t in range(T):
            for j in range(K):
                r = inv[t * K + j]
                if (t, j) not in ys:
                    expect(r == -1, f"{layout}: dropped slot ({t}, {j}) has row {r}")
                    continue
                expect(0 <= r < rows and r not in used, f"{layout}: slot ({t}, {j}) row {r}")
                used.add(r)
                got = [bf16_value(v) for v in y[r * H:(r + 1) * H]]
                for h in range(H):
                    expect(abs(got[h] - ys[(t, j)][h]) <= ulp(ys[(t, j)][h]),
                           f"{layout}: y of slot ({t}, {j})[{h}] = {got[h]}, model {ys[(t, j)][h]}")
        for r in set(range(rows)) - used:
            expect(all(v == 0 for v in y[r * H:(r + 1) * H]), f"{layout}: unused row {r} is not 0")
        if layout == "compact":
            # rows grouped by expert, ascending
            owners = [m["ids"][s] for s in sorted(range(T * K), key=lambda s: inv[s]) if inv[s] >= 0]
            expect(owners == sorted(owners), f"compact rows not grouped by expert: {owners}")


@case()
def experts_generated_inputs_are_the_gen_files():
    # A run without files uses exactly what `moekit gen` writes for the same seed:
    # hidden rows, ids (gen align), weights (gen topk-weights), W1 and W2 (gen experts-weights).
    d = tmp()
    T, K, E, H, I, seed = 6, 3, 5, 12, 10, 7
    for dt in ("bf16", "f16"):
        f = {n: os.path.join(d, f"{n}_{dt}.npy") for n in ("x", "ids", "w", "w1", "w2")}
        run("gen", "experts", "--tokens", T, "--hidden-size", H, "--dtype", dt, "--seed", seed, "-o", f["x"], code=0)
        run("gen", "align", "--tokens", T, "--topk", K, "-E", E, "--seed", seed, "-o", f["ids"], code=0)
        run("gen", "topk-weights", "--tokens", T, "--topk", K, "--seed", seed, "-o", f["w"], code=0)
        for which in ("w1", "w2"):
            run("gen", "experts-weights", "--which", which, "-E", E, "--hidden-size", H, "--inter-size", I, "--dtype",
                dt, "--seed", seed, "-o", f[which], code=0)
        hw1, w1 = load_npy(f["w1"])
        hw2, w2 = load_npy(f["w2"])
        expect(hw1["shape"] == (E, 2 * I, H) and hw2["shape"] == (E, H, I), (hw1, hw2))
        expect(len(set(w1)) > len(w1) // 4 and len(set(w2)) > len(w2) // 4, "generated weights barely vary")
        a, b = os.path.join(d, "gen_" + dt), os.path.join(d, "files_" + dt)
        p = run(COMMAND, "--tokens", T, "-k", K, "-E", E, "--hidden-size", H, "--inter-size", I, "--gen-dtype", dt,
                "--seed", seed, "--device", "cpu", "--out", a, "--format", "json", code=0)
        expect(json_of(p)["params"]["weights"] == "generated", p.stdout)
        run(COMMAND, "--hidden", f["x"], "--topk-ids", f["ids"], "--topk-weights", f["w"], "--w1", f["w1"], "--w2",
            f["w2"], "--seed", seed + 1, "--device", "cpu", "--out", b, code=0)
        expect(same_files(a, b), f"{dt}: the generated run differs from the run on the gen files")
        # another seed: other weights, another out
        c = os.path.join(d, "seed_" + dt)
        run(COMMAND, "--hidden", f["x"], "--topk-ids", f["ids"], "--topk-weights", f["w"], "-E", E, "--inter-size", I,
            "--seed", seed + 1, "--device", "cpu", "--out", c, code=0)
        expect(not same_files(a, c), f"{dt}: the weights' seed changed nothing")


@case()
def experts_expert_map_is_ids_mapped():
    # Global ids through a map give what the mapped local ids give directly.
    d = tmp()
    T, K, E, G = 5, 2, 3, 8
    emap = [-1, 2, 0, -1, 1, -1, 0, 2]  # 8 global experts, 3 local (two global ids share local 0)
    gids = [(3 * t + 5 * j + 1) % G for t in range(T) for j in range(K)]
    gids[0] = -1
    gids[3] = G + 2  # outside the map: dropped
    local = [emap[g] if 0 <= g < G else -1 for g in gids]
    f, m = inputs(d, T=T, K=K, E=E, ids=local)
    mp = os.path.join(d, "map.npy")
    save_npy(mp, "<i4", (G,), emap)
    fg = dict(f, ids=os.path.join(d, "gids.npy"))
    save_npy(fg["ids"], "<i4", (T, K), gids)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    run(COMMAND, *file_args(f), "--device", "cpu", "--out", a, code=0)
    p = run(COMMAND, *file_args(fg), "--expert-map", mp, "--device", "cpu", "--out", b, "--format", "json", code=0)
    o = json_of(p)
    expect(same_files(a, b), "the map changed the result")
    dropped = sum(1 for v in local if v < 0)
    expect(dropped >= 3 and o["summary"]["kept_slots"] == T * K - dropped and o["params"]["expert_map"] == G, o)
    # Without W1: E is the largest entry + 1; generated weights the same either way.
    p = run(COMMAND, "--hidden", f["x"], "--topk-ids", fg["ids"], "--topk-weights", f["w"], "--dtype", "bf16",
            "--expert-map", mp, "--inter-size", 4, "--device", "cpu", "--format", "json", code=0)
    expect(json_of(p)["params"]["experts"] == 3, p.stdout)
    # A map entry outside the local experts of W1
    save_npy(mp, "<i4", (G,), [3] + emap[1:])
    one_line_refusal(run(COMMAND, *file_args(fg), "--expert-map", mp, "--device", "cpu", code=2), "entry 0 maps to 3")


@case()
def experts_bad_input_exits_2():
    d = tmp()
    f, m = inputs(d)
    T, K, E, H, I = m["T"], m["K"], m["E"], m["H"], m["I"]
    bad = os.path.join(d, "bad.npy")

    def refused(word, *args):
        one_line_refusal(run(COMMAND, *args, "--device", "cpu", code=2), word)

    def with_(**kw):
        return file_args(dict(f, **kw))

    # W2 not [E, H, I] for W1's E, H, I
    save_npy(bad, "<u2", (E, H, I + 1), [0] * (E * H * (I + 1)))
    refused("W2 must be [E, H, I] = (3, 8, 4)", *with_(w2=bad))
    save_npy(bad, "<u2", (E + 1, H, I), [0] * ((E + 1) * H * I))
    refused("bad.npy", *with_(w2=bad))
    # W1 against the hidden rows' H
    save_npy(bad, "<u2", (E, 2 * I, H + 2), [0] * (E * 2 * I * (H + 2)))
    refused("W1 rows have 10 columns, but H is 8", *with_(w1=bad))
    # W1's rows are not 2I
    save_npy(bad, "<u2", (E, 2 * I + 1, H), [0] * (E * (2 * I + 1) * H))
    refused("not 2I", *with_(w1=bad))
    # 2-D weights
    save_npy(bad, "<u2", (E * 2 * I, H), [0] * (E * 2 * I * H))
    refused("3-D", *with_(w1=bad))
    # dtypes: f16 rows with bf16 weights, f32 rows, ids as floats
    def retyped(path, descr):
        with open(path, "rb") as src:
            raw = src.read()
        out = path.replace(".npy", descr.strip("<|") + ".npy")
        with open(out, "wb") as dst:
            dst.write(raw.replace(b"'<u2'", f"'{descr}'".encode(), 1))
        return out
    refused("share one dtype", "--hidden", retyped(f["x"], "<f2"), "--topk-ids", f["ids"], "--topk-weights", f["w"],
            "--w1", retyped(f["w1"], "|V2"), "--w2", retyped(f["w2"], "|V2"))
    save_npy(bad, "<f4", (T, H), [0.5] * (T * H))
    refused("bfloat16 or float16", "--hidden", bad, "--topk-ids", f["ids"], "--topk-weights", f["w"], "-E", E,
            "--inter-size", I)
    save_npy(bad, "<f4", (T, K), [0.0] * (T * K))
    refused("int32 or int64", *with_(ids=bad))
    # 3-D ids
    save_npy(bad, "<i4", (T, K, 1), [0] * (T * K))
    refused("[T, K]", *with_(ids=bad))
    # weights not [T, K]
    save_npy(bad, "<f4", (T, K + 1), [0.5] * (T * (K + 1)))
    refused("float32 [4, 2]", *with_(w=bad))
    save_npy(bad, "<f4", (T, K), [0.5] * (T * K - 1) + [float("nan")])
    refused("weights must be finite", *with_(w=bad))
    # ids and rows disagree on T
    save_npy(bad, "<i4", (T + 1, K), [0] * ((T + 1) * K))
    save_npy(os.path.join(d, "w5.npy"), "<f4", (T + 1, K), [0.5] * ((T + 1) * K))
    refused("5 tokens", *with_(ids=bad, w=os.path.join(d, "w5.npy")))
    # options against the files
    refused("-E is 4", *file_args(f), "-E", 4)
    refused("--topk is 3", *file_args(f), "--topk", 3)
    refused("--inter-size", *file_args(f)[:6], "--dtype", "bf16", "-E", E)  # no I without --w1
    refused("--tokens", "-E", 8, "-k", 2, "--hidden-size", 8, "--inter-size", 4)  # no input, no --tokens
    refused("K is missing", "--tokens", 2, "-E", 8, "--hidden-size", 8, "--inter-size", 4)
    refused("more than the 4 experts", "--tokens", 2, "-E", 4, "-k", 5, "--hidden-size", 8, "--inter-size", 4)
    refused(None, "--tokens", 2, "--model", "mixtral", "--w1", f["w1"])  # --w1 without --w2
    refused(None, *file_args(f), "--tokens", 3)  # files and --tokens
    refused(None, *file_args(f), "--hidden-size", 8)  # H from the files
    refused("finite", *file_args(f), "--routed-scaling-factor", "inf")
    refused(None, *SMALL_ARGS, "--act", "relu")
    refused(None, *SMALL_ARGS, "--layout", "padded", "-B", 0)


@case()
def experts_gather_needs_the_padded_layout():
    # gather's gemm1 reads hidden through sorted_token_ids: the compact layout
    # has none, so it is refused on every machine with one line saying why.
    p = run(COMMAND, *SMALL_ARGS, "--variant", "gather", "--layout", "compact", "--device", "cpu", code=2)
    one_line_refusal(p, "variant 'gather' does not apply to this input: needs --layout padded "
                        "(it gathers through sorted_token_ids)")
    p = run(COMMAND, *SMALL_ARGS, "--variant", "gather", "--device", "cpu", code=2)  # compact is the default
    one_line_refusal(p, "needs --layout padded")
    run(COMMAND, *SMALL_ARGS, "--variant", "gather", "--layout", "padded", "-B", 4, "--device", "cpu", code=0)


@case()
def experts_model_presets_and_zero_tokens():
    def params(*args):
        return json_of(run(COMMAND, "--tokens", 0, *args, "--device", "cpu", "--format", "json", code=0))["params"]
    for name, (E, K, H, I, S) in {"mixtral": (8, 2, 4096, 14336, 1), "qwen3-235b": (128, 8, 4096, 1536, 1),
                                  "deepseek-v3": (256, 8, 7168, 2048, 2.5),
                                  "deepseek-v3-tp8": (256, 8, 7168, 256, 2.5)}.items():
        pm = params("--model", name)
        expect((pm["experts"], pm["topk"], pm["hidden"], pm["inter"], pm["scaling"], pm["model"]) ==
               (E, K, H, I, S, name), f"{name}: {pm}")
    pm = params("--model", "deepseek-v3", "-E", 64, "--inter-size", 32, "--routed-scaling-factor", 1)
    expect(pm["experts"] == 64 and pm["inter"] == 32 and pm["scaling"] == 1 and pm["topk"] == 8, pm)
    d = tmp()
    # Files give E, K, H and I; the model only what they leave out (S here).
    f, _ = inputs(d)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    p = run(COMMAND, *file_args(f), "--model", "deepseek-v3", "--device", "cpu", "--out", a, "--format", "json", code=0)
    pm = json_of(p)["params"]
    expect((pm["experts"], pm["topk"], pm["hidden"], pm["inter"], pm["scaling"]) == (3, 2, 8, 4, 2.5), pm)
    run(COMMAND, *file_args(f), "--routed-scaling-factor", 2.5, "--device", "cpu", "--out", b, code=0)
    expect(same_files(a, b), "--model deepseek-v3 on files is not S = 2.5 on them")
    out = os.path.join(d, "o")
    run(COMMAND, "--tokens", 0, *SMALL_ARGS[2:], "--keep-intermediate", "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "out.npy"))[0]["shape"] == (0, 16), "T = 0")
    expect(load_npy(os.path.join(out, "inverse.npy"))[0]["shape"] == (0, 2), "T = 0 inverse")


@case()
def experts_deepseek_decode_on_the_cpu():
    # What ../shared/peers/compare.py --dry runs: the reference reads only the 8
    # experts a token uses (22 GB of weights are never made on the host).
    p = run(COMMAND, "--model", "deepseek-v3-tp8", "--tokens", 1, "--device", "cpu", "--iters", 1, "--format", "json",
            code=0)
    o = json_of(p)
    expect(o["summary"]["kept_slots"] == 8 and o["summary"]["active_experts"] == 8, o["summary"])
    expect(o["summary"]["flop"] == 2 * 8 * 3 * 7168 * 256, o["summary"])


@case("gpu")
def experts_gpu_checks_files_keep_and_stages():
    if not has_gpu():
        return SKIP
    d = tmp()
    f, m = inputs(d)
    for layout in ("compact", "padded"):
        b = os.path.join(d, "gpu_" + layout)
        p = run(COMMAND, *file_args(f), "--layout", layout, "-B", 4, "--keep-intermediate", "--device", "gpu", "--out",
                b, "--format", "json", code=0)
        o = json_of(p)
        expect(o["check"]["result"] == "pass", o["check"])
        expect(sorted(os.listdir(b)) == ["inverse.npy", "out.npy", "y.npy"], os.listdir(b))
    # weights from files and the device's generator agree
    T, K, E, H, I, seed = 40, 4, 16, 72, 40, 5
    f2 = {n: os.path.join(d, n + ".npy") for n in ("w1", "w2")}
    for which in ("w1", "w2"):
        run("gen", "experts-weights", "--which", which, "-E", E, "--hidden-size", H, "--inter-size", I, "--seed", seed,
            "-o", f2[which], code=0)
    a, b = os.path.join(d, "gen"), os.path.join(d, "files")
    shape = ["--tokens", T, "-k", K, "-E", E, "--hidden-size", H, "--inter-size", I, "--seed", seed, "--device", "gpu"]
    run(COMMAND, *shape, "--out", a, code=0)
    run(COMMAND, *shape[:6], "--seed", seed, "--device", "gpu", "--w1", f2["w1"], "--w2", f2["w2"], "--out", b, code=0)
    expect(same_files(a, b), "the device's generated weights differ from gen experts-weights'")
    # a sampled check says so; --bench times the three stages
    p = run(COMMAND, "--model", "qwen3-235b", "--tokens", 256, "--device", "gpu", "--bench", "--iters", 5, "--format",
            "json", code=0)
    o = json_of(p)
    expect(o["check"]["result"] == "pass" and any("(seeded sample" in n for n in o["notes"]), o)
    expect(list(o["stage_us"]) == ["layout", "ffn", "combine", "sum"], o["stage_us"])
    expect(o["gbps"] > 0, o)


@case("gpu")
def experts_gpu_gather_equals_mma_on_the_padded_layout():
    # gather runs mma's kernels on the same padded layout, its gemm1 reading the
    # hidden rows where mma reads permute's copies of them (padding rows zero
    # both ways): every slot's y and every out element are the same bits. Both
    # are also checked against the reference (y too: --keep-intermediate).
    if not has_gpu():
        return SKIP
    d = tmp()
    shape = ["--tokens", 40, "-k", 4, "-E", 16, "--hidden-size", 72, "--inter-size", 40, "--seed", 5, "--layout",
             "padded", "-B", 16, "--device", "gpu", "--format", "json"]
    outs = {}
    for v in ("mma", "gather"):
        outs[v] = os.path.join(d, v)
        o = json_of(run(COMMAND, *shape, "--variant", v, "--keep-intermediate", "--out", outs[v], code=0))
        expect(o["check"]["result"] == "pass", f"{v}: {o['check']}")
    expect(same_files(outs["mma"], outs["gather"]), "gather's out.npy differs from mma's")
    rows = {}
    for v in ("mma", "gather"):
        hi, inv = load_npy(os.path.join(outs[v], "inverse.npy"))
        hy, y = load_npy(os.path.join(outs[v], "y.npy"))
        H = hy["shape"][1]
        rows[v] = [None if r < 0 else tuple(y[r * H:(r + 1) * H]) for r in inv]  # each slot's y (align's row order aside)
    expect(rows["mma"] == rows["gather"], "gather's y of some slot differs from mma's")
    expect(any(r is not None for r in rows["gather"]), "no kept slot")
    # --bench times its three stages; the report names its layout stage
    o = json_of(run(COMMAND, *shape, "--variant", "gather", "--bench", "--iters", 5, code=0))
    expect(list(o["stage_us"]) == ["layout", "ffn", "combine", "sum"], o["stage_us"])
    expect(any(n.startswith("stages: layout permute index (align ") for n in o["notes"]), o["notes"])
