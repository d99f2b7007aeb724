"""CLI cases of the ep family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import os

from cli_harness import case, expect, has_gpu, load_npy, run, save_npy, tmp


COMMAND = "ep"
# One rank: the generic cases also run where one GPU is visible.
SMALL_ARGS = ["--ranks", 1, "-E", 8, "--topk", 2, "--tokens", 3, "--hidden-size", 16]
BUNDLED_ARGS = ["--ranks", 1, "-E", 64, "--topk", 8, "--tokens", 64, "--hidden-size", 1030,
                "--routed-scaling-factor", 2.5]
OVERSIZED = [
    (["ep", "--ranks", 2, "-E", 8, "--topk", 8, "--tokens", 1 << 40, "--hidden-size", 1 << 20, "--device", "cpu"],
     "too large"),
    (["gen", "ep", "--which", "hidden", "--ranks", 8, "--tokens", 1 << 40, "--hidden-size", 1 << 20, "-o", "{out}"],
     "too large"),
]


def per_rank_inputs(d, R=2, T=3, K=2, H=4, E=4):
    """f32 rows that name their origin, ids with a dropped slot, weights."""
    x, ids, w = (os.path.join(d, n) for n in ("x.npy", "ids.npy", "w.npy"))
    save_npy(x, "<f4", (R, T, H), [float(100 * s + t) + c / 8 for s in range(R) for t in range(T) for c in range(H)])
    iv = [((s + t + 3 * j) % (E + 1)) - 1 for s in range(R) for t in range(T) for j in range(K)]  # -1: dropped
    save_npy(ids, "<i4", (R, T, K), iv)
    save_npy(w, "<f4", (R, T, K), [0.25 + 0.125 * i for i in range(R * T * K)])
    return x, ids, w


@case()
def ep_cpu_matches_model():
    d = tmp()
    R, T, K, H, E = 2, 3, 2, 4, 4
    x, ids, w = per_rank_inputs(d, R, T, K, H, E)
    xv, iv, wv = load_npy(x)[1], load_npy(ids)[1], load_npy(w)[1]
    out = os.path.join(d, "o")
    run("ep", "--ranks", R, "-E", E, "--hidden", x, "--topk-ids", ids, "--topk-weights", w,
        "--routed-scaling-factor", 2, "--device", "cpu", "--out", out, code=0)
    h, got = load_npy(os.path.join(out, "out.npy"))
    expect(h["shape"] == (R, T, H), f"{h}")
    for s in range(R):
        for t in range(T):
            ws = sum(wv[(s * T + t) * K + j] for j in range(K) if iv[(s * T + t) * K + j] >= 0)
            for c in range(H):
                want = 2 * ws * xv[(s * T + t) * H + c]
                g = got[(s * T + t) * H + c]
                expect(abs(g - want) <= 1e-6 * abs(want), f"out[{s},{t},{c}] {g} vs {want}")
    # Offsets: rank r owns experts 2r, 2r + 1; each gets one row per slot naming it.
    h, off = load_npy(os.path.join(out, "expert_offsets.npy"))
    expect(h["shape"] == (R, 3), f"{h}")
    for r in range(R):
        counts = [sum(1 for v in iv if v == 2 * r + i) for i in range(2)]
        expect(off[r * 3:(r + 1) * 3] == [0, counts[0], counts[0] + counts[1]], f"rank {r}: {off}, {counts}")
    h, rows = load_npy(os.path.join(out, "received.npy"))
    expect(h["shape"] == (off[2] + off[5], H), f"{h}")
    # Rank 0's first expert (global 0) holds, as a set, the rows of the slots that name it.
    want = sorted(xv[(s * T + t) * H] for s in range(R) for t in range(T) for j in range(K)
                  if iv[(s * T + t) * K + j] == 0)
    expect(sorted(rows[i * H] for i in range(off[1])) == want, f"{rows} vs {want}")


@case()
def ep_one_rank_is_moe_path():
    """One rank: the same files through `moe-path --layout compact` (identity experts) give the same bytes,
    on the GPU where there is one (combine's rule on both sides), else on the CPU."""
    d = tmp()
    T, K, H, E = 9, 3, 24, 12
    run("gen", "align", "--tokens", T, "--topk", K, "-E", E, "--seed", 5, "-o", os.path.join(d, "ids.npy"), code=0)
    run("gen", "topk-weights", "--tokens", T, "--topk", K, "--seed", 5, "-o", os.path.join(d, "w.npy"), code=0)
    run("gen", "moe-path", "--tokens", T, "--hidden-size", H, "--seed", 5, "-o", os.path.join(d, "x.npy"), code=0)
    files = ["--hidden", os.path.join(d, "x.npy"), "--topk-ids", os.path.join(d, "ids.npy"),
             "--topk-weights", os.path.join(d, "w.npy")]
    run("moe-path", *files, "-E", E, "--layout", "compact", "--routed-scaling-factor", 2.5,
        "--out", os.path.join(d, "mp"), code=0)
    run("ep", "--ranks", 1, *files, "-E", E, "--routed-scaling-factor", 2.5, "--out", os.path.join(d, "ep"), code=0)
    a = open(os.path.join(d, "mp", "out.npy"), "rb").read()
    b = open(os.path.join(d, "ep", "out.npy"), "rb").read()
    ha, hb = load_npy(os.path.join(d, "mp", "out.npy"))[0], load_npy(os.path.join(d, "ep", "out.npy"))[0]
    expect(hb["shape"] == (1,) + ha["shape"], f"{ha} {hb}")
    expect(a[-T * H * 2:] == b[-T * H * 2:], "ep --ranks 1 and moe-path differ")


@case()
def ep_generated_equals_gen_files():
    """A run's generated inputs are what `gen ep` writes for the same seed."""
    d = tmp()
    common = ["--ranks", 2, "-E", 8, "--topk", 2]
    run("ep", *common, "--tokens", 5, "--hidden-size", 8, "--seed", 7, "--device", "cpu", "--out",
        os.path.join(d, "a"), code=0)
    for which in ("hidden", "ids", "weights"):
        run("gen", "ep", "--which", which, "--ranks", 2, "--tokens", 5, "--hidden-size", 8, "-E", 8, "--topk", 2,
            "--seed", 7, "-o", os.path.join(d, which + ".npy"), code=0)
    run("ep", *common, "--hidden", os.path.join(d, "hidden.npy"), "--topk-ids", os.path.join(d, "ids.npy"),
        "--topk-weights", os.path.join(d, "weights.npy"), "--device", "cpu", "--out", os.path.join(d, "b"), code=0)
    for f in ("out.npy", "expert_offsets.npy", "received.npy"):
        expect(open(os.path.join(d, "a", f), "rb").read() == open(os.path.join(d, "b", f), "rb").read(), f)


@case()
def ep_bad_input_exits_2():
    d = tmp()
    x, ids, w = per_rank_inputs(d)
    files = ["--hidden", x, "--topk-ids", ids, "--topk-weights", w]

    def one_line(p, *words):
        expect(len(p.stderr.strip().splitlines()) == 1 and all(s in p.stderr for s in words), p.stderr)

    one_line(run("ep", "--ranks", 3, "-E", 4, *files, "--device", "cpu", code=2), "3 given")
    one_line(run("ep", "--ranks", 9, "-E", 8, "--topk", 2, "--tokens", 2, "--device", "cpu", code=2), "--ranks")
    one_line(run("ep", "--ranks", 2, "-E", 7, "--topk", 2, "--tokens", 2, "--device", "cpu", code=2),
             "7 experts do not divide over 2 ranks")
    place = os.path.join(d, "place.npy")
    save_npy(place, "<i4", (4,), [0, 1, 5, 0])
    one_line(run("ep", "--ranks", 2, "-E", 4, *files, "--expert-placement", place, "--device", "cpu", code=2),
             "place.npy", "rank 5")
    save_npy(place, "<i4", (3,), [0, 1, 1])
    one_line(run("ep", "--ranks", 2, "-E", 4, *files, "--expert-placement", place, "--device", "cpu", code=2),
             "3 entries for 4 experts")
    short = os.path.join(d, "short.npy")
    save_npy(short, "<i4", (2, 4, 2), [0] * 16)  # 4 tokens a rank against the hidden states' 3
    one_line(run("ep", "--ranks", 2, "-E", 4, "--hidden", x, "--topk-ids", short, "--topk-weights", w,
                 "--device", "cpu", code=2), "short.npy")
    nan_w = os.path.join(d, "nan_w.npy")
    save_npy(nan_w, "<f4", (2, 3, 2), [0.5] * 7 + [float("nan")] + [0.5] * 4)
    one_line(run("ep", "--ranks", 2, "-E", 4, "--hidden", x, "--topk-ids", ids, "--topk-weights", nan_w,
                 "--device", "cpu", code=2), "nan_w.npy", "finite")
    three = os.path.join(d, "three.npy")
    save_npy(three, "<f4", (3, 3, 4), [0.0] * 36)  # 3 ranks of hidden rows against the ids' 2
    one_line(run("ep", "-E", 6, "--hidden", three, "--topk-ids", ids, "--topk-weights", w, "--device", "cpu",
                 code=2), "ids.npy", "2 ranks")
    if has_gpu():
        p = run("ep", "--ranks", 8, "-E", 8, "--topk", 2, "--tokens", 2, "--device", "gpu")
        expect(p.returncode in (0, 2), p.stderr)
        if p.returncode == 2:
            one_line(p, "GPU(s) visible")


@case()
def ep_uneven_placement_cpu():
    """A placement file: rank 1 owns nothing; its expert offsets stay [0, 0 ...]."""
    d = tmp()
    x, ids, w = per_rank_inputs(d)
    place = os.path.join(d, "place.npy")
    save_npy(place, "<i8", (4,), [0, 0, 0, 0])
    out = os.path.join(d, "o")
    run("ep", "--ranks", 2, "-E", 4, "--hidden", x, "--topk-ids", ids, "--topk-weights", w,
        "--expert-placement", place, "--device", "cpu", "--out", out, code=0)
    h, off = load_npy(os.path.join(out, "expert_offsets.npy"))
    expect(h["shape"] == (2, 5) and off[5:] == [0] * 5, f"{h} {off}")


@case("gpu")
def ep_p2p_reduce_one_rank():
    """p2p-reduce on one GPU: with S 1 its one partial, rounded once, is combine's rule, so out is the CPU
    reference's bytes; with S 2.5 the run's own check (the partial-sum rule) passes and names that rule."""
    if not has_gpu():
        return 77
    d = tmp()
    T, K, H, E = 9, 3, 24, 12
    run("gen", "align", "--tokens", T, "--topk", K, "-E", E, "--seed", 3, "-o", os.path.join(d, "ids.npy"), code=0)
    run("gen", "topk-weights", "--tokens", T, "--topk", K, "--seed", 3, "-o", os.path.join(d, "w.npy"), code=0)
    run("gen", "moe-path", "--tokens", T, "--hidden-size", H, "--seed", 3, "-o", os.path.join(d, "x.npy"), code=0)
    files = ["--ranks", 1, "-E", E, "--hidden", os.path.join(d, "x.npy"), "--topk-ids", os.path.join(d, "ids.npy"),
             "--topk-weights", os.path.join(d, "w.npy")]
    run("ep", *files, "--device", "cpu", "--out", os.path.join(d, "cpu"), code=0)
    run("ep", *files, "--variant", "p2p-reduce", "--device", "gpu", "--out", os.path.join(d, "gpu"), code=0)
    a = open(os.path.join(d, "cpu", "out.npy"), "rb").read()
    b = open(os.path.join(d, "gpu", "out.npy"), "rb").read()
    expect(a == b, "p2p-reduce on one rank with S 1 differs from combine's rule")
    p = run("ep", *files, "--routed-scaling-factor", 2.5, "--variant", "p2p-reduce", "--device", "gpu", code=0)
    expect("per-rank partials" in p.stdout + p.stderr, p.stdout[-1500:])


@case("gpu")
def ep_plan_past_256_blocks():
    """T 66000 on one rank: the plan's second pass runs 258 blocks of 256 tokens, so a block sums the blocks before
    it in strides of 256 (gpu_ep stops at T 1500: 6 blocks). The run checks itself against the CPU reference."""
    if not has_gpu():
        return 77
    p = run("ep", "--ranks", 1, "-E", 16, "-k", 8, "--tokens", 66000, "--hidden-size", 8, "--dist", "zipf:1.2",
            "--variant", "p2p", "--device", "gpu", code=0)
    expect("check: pass" in p.stdout, p.stdout[-1500:])


@case()
def ep_cpu_run_follows_the_variants_rule():
    """A CPU run asked for p2p-reduce writes the partial-sum rule's out, not combine's: one f16 token of 1.0 with
    weight 1 + 2^-11 on rank 0's expert and 2^-11 on rank 1's. Combine's rule: 1 + 2^-10 exactly; per rank: 1.0
    (a tie, to even) plus 2^-11, again a tie that rounds to 1.0. Either file passes the run's own check."""
    d = tmp()
    x, ids, w = (os.path.join(d, n) for n in ("x.npy", "ids.npy", "w.npy"))
    save_npy(x, "<f2", (2, 1, 1), [1.0, 0.0])
    save_npy(ids, "<i4", (2, 1, 2), [0, 1, -1, -1])
    save_npy(w, "<f4", (2, 1, 2), [1.0 + 2.0 ** -11, 2.0 ** -11, 1.0, 1.0])
    files = ["--ranks", 2, "-E", 2, "--hidden", x, "--topk-ids", ids, "--topk-weights", w, "--device", "cpu"]
    want = {"auto": 1.0 + 2.0 ** -10, "p2p": 1.0 + 2.0 ** -10, "p2p-reduce": 1.0, "p2p-reduce-signal": 1.0}
    for variant, value in want.items():
        out = os.path.join(d, variant)
        run("ep", *files, "--variant", variant, "--out", out, code=0)
        h, got = load_npy(os.path.join(out, "out.npy"))
        expect(got[0] == value, f"{variant}: out[0, 0, 0] = {got[0]!r}, expected {value!r}")


@case()
def ep_ffn_one_rank_is_moe_path():
    """--experts ffn on one rank: the same files through `moe-path --experts ffn` give the same out bytes (CPU
    references on both sides: the experts reference per slot with the same generated weights, then combine's rule),
    and ep writes y.npy beside received.npy, row for row."""
    d = tmp()
    T, K, H, E, I = 7, 3, 24, 8, 16
    run("gen", "align", "--tokens", T, "--topk", K, "-E", E, "--seed", 4, "-o", os.path.join(d, "ids.npy"), code=0)
    run("gen", "topk-weights", "--tokens", T, "--topk", K, "--seed", 4, "-o", os.path.join(d, "w.npy"), code=0)
    run("gen", "moe-path", "--tokens", T, "--hidden-size", H, "--seed", 4, "-o", os.path.join(d, "x.npy"), code=0)
    files = ["--hidden", os.path.join(d, "x.npy"), "--topk-ids", os.path.join(d, "ids.npy"),
             "--topk-weights", os.path.join(d, "w.npy"), "-E", E, "--experts", "ffn", "--inter-size", I,
             "--routed-scaling-factor", 2.5, "--device", "cpu", "--seed", 9]
    run("moe-path", *files, "--out", os.path.join(d, "mp"), code=0)
    run("ep", "--ranks", 1, *files, "--out", os.path.join(d, "ep"), code=0)
    a = open(os.path.join(d, "mp", "out.npy"), "rb").read()
    b = open(os.path.join(d, "ep", "out.npy"), "rb").read()
    expect(a[-T * H * 2:] == b[-T * H * 2:], "ep --ranks 1 --experts ffn and moe-path --experts ffn differ")
    hr, _ = load_npy(os.path.join(d, "ep", "received.npy"))
    hy, _ = load_npy(os.path.join(d, "ep", "y.npy"))
    expect(hr["shape"] == hy["shape"] == (T * K, H), f"{hr} {hy}")
    # Another seed generates other weights: the out differs.
    run("ep", "--ranks", 1, *files[:-1], 10, "--out", os.path.join(d, "ep10"), code=0)
    c = open(os.path.join(d, "ep10", "out.npy"), "rb").read()
    expect(c[-T * H * 2:] != b[-T * H * 2:], "the weights did not follow --seed")


def ffn_weight_files(d, E, H, I, seed=1):
    """f16 W1 [E, 2I, H] and W2 [E, H, I] with small values that differ per expert, row and column."""
    w1, w2 = os.path.join(d, "w1.npy"), os.path.join(d, "w2.npy")
    v = lambda e, r, c, m: ((e * 131 + r * 31 + c * 7 + seed * 17 + m * 5) % 23 - 11) / 64.0
    save_npy(w1, "<f2", (E, 2 * I, H), [v(e, r, c, 0) for e in range(E) for r in range(2 * I) for c in range(H)])
    save_npy(w2, "<f2", (E, H, I), [v(e, r, c, 1) for e in range(E) for r in range(H) for c in range(I)])
    return w1, w2


@case()
def ep_ffn_given_weights():
    """--w1/--w2 (global expert order): one rank writes moe-path's out bytes for the same files and weights; two
    ranks (each its own experts' rows of the files) pass the files' own check; the weights change the answer."""
    d = tmp()
    T, K, H, E, I = 5, 2, 16, 4, 8
    x, ids, w = (os.path.join(d, n) for n in ("x.npy", "ids.npy", "w.npy"))
    save_npy(x, "<f2", (T, H), [((t * 5 + c * 3) % 11 - 5) / 8.0 for t in range(T) for c in range(H)])
    save_npy(ids, "<i4", (T, K), [(t + 3 * j) % E for t in range(T) for j in range(K)])
    save_npy(w, "<f4", (T, K), [0.25 + 0.125 * i for i in range(T * K)])
    w1, w2 = ffn_weight_files(d, E, H, I)
    files = ["--hidden", x, "--topk-ids", ids, "--topk-weights", w, "-E", E, "--experts", "ffn", "--w1", w1,
             "--w2", w2, "--device", "cpu"]
    run("moe-path", *files, "--out", os.path.join(d, "mp"), code=0)
    p = run("ep", "--ranks", 1, *files, "--out", os.path.join(d, "ep"), code=0)
    expect("expert_weights=given" in p.stdout, p.stdout[-1500:])
    a = open(os.path.join(d, "mp", "out.npy"), "rb").read()
    b = open(os.path.join(d, "ep", "out.npy"), "rb").read()
    expect(a[-T * H * 2:] == b[-T * H * 2:], "ep --ranks 1 with given weights and moe-path differ")
    # Two ranks of the same tokens: rank r's row t is token t's, so every rank's out is the one-rank out.
    x2, ids2, w2f = (os.path.join(d, n) for n in ("x2.npy", "ids2.npy", "w2f.npy"))
    for src, dst, descr in ((x, x2, "<f2"), (ids, ids2, "<i4"), (w, w2f, "<f4")):
        h, vals = load_npy(src)
        save_npy(dst, descr, (2,) + h["shape"], vals + vals)
    run("ep", "--ranks", 2, "--hidden", x2, "--topk-ids", ids2, "--topk-weights", w2f, *files[6:],
        "--out", os.path.join(d, "ep2"), code=0)
    c = open(os.path.join(d, "ep2", "out.npy"), "rb").read()
    expect(c[-2 * T * H * 2:] == b[-T * H * 2:] * 2, "two ranks of the same tokens differ from one")
    o1, o2 = ffn_weight_files(d, E, H, I, seed=2)
    run("ep", "--ranks", 1, *files[:10], "--w1", o1, "--w2", o2, "--device", "cpu", "--out", os.path.join(d, "other"),
        code=0)
    e = open(os.path.join(d, "other", "out.npy"), "rb").read()
    expect(e[-T * H * 2:] != b[-T * H * 2:], "other weights gave the same out")


@case()
def ep_ffn_options_exit_2():
    """The FFN's options need --experts ffn, ffn needs I, and takes no f32 rows: one line each, exit 2."""
    base = ["ep", "--ranks", 2, "-E", 8, "--topk", 2, "--tokens", 3, "--hidden-size", 16, "--device", "cpu"]

    def one_line(p, *words):
        expect(len(p.stderr.strip().splitlines()) == 1 and all(s in p.stderr for s in words), p.stderr)

    one_line(run(*base, "--inter-size", 8, code=2), "--inter-size", "--experts ffn")
    one_line(run(*base, "--act", "gelu", code=2), "--act", "--experts ffn")
    one_line(run(*base, "--w1-layout", "interleaved", code=2), "--w1-layout", "--experts ffn")
    one_line(run(*base, "--experts", "ffn", code=2), "--inter-size")
    one_line(run(*base, "--experts", "ffn", "--inter-size", 0, code=2), "--inter-size must be >= 1")
    one_line(run(*base, "--experts", "ffn", "--inter-size", 8, "--gen-dtype", "f32", code=2), "f32")
    one_line(run(*base, "--experts", "ffn", "--inter-size", 8, "--act", "swiglu-oai", code=2), "interleaved")
    d = tmp()
    w1, w2 = ffn_weight_files(d, 8, 16, 4)  # f16 against bf16 rows
    one_line(run(*base, "--experts", "ffn", "--w1", w1, "--w2", w2, code=2), "w1.npy", "like the hidden states")
    one_line(run(*base, "--w1", w1, "--w2", w2, code=2), "--w1", "--experts ffn")
    f16 = base + ["--gen-dtype", "f16", "--experts", "ffn"]
    w1b, w2b = ffn_weight_files(tmp(), 4, 16, 4)  # E 4 against -E 8
    one_line(run(*f16, "--w1", w1b, "--w2", w2, code=2), "w1.npy", "[8, 2I, 16]")
    one_line(run(*f16, "--w1", w1, "--w2", w1, code=2), "w1.npy", "W2 must be")
    # The weights a GPU holds follow the placement: 100 experts a rank fit 1 TiB, all 200 on rank 0 do not
    # (each expert 3 x 32767 x 32768 bf16: 6.4 GB).
    place = os.path.join(d, "all0.npy")
    save_npy(place, "<i4", (200,), [0] * 200)
    one_line(run("ep", "--ranks", 2, "-E", 200, "-k", 1, "--tokens", 1, "--hidden-size", 32768, "--experts", "ffn",
                 "--inter-size", 32767, "--expert-placement", place, "--device", "cpu", code=2),
             "200 experts", "TB a GPU")
    p = run("ep", "--ranks", 2, "-E", 200, "-k", 1, "--tokens", 1, "--hidden-size", 32768, "--experts", "ffn",
            "--inter-size", 32767, "--device", "cpu", code=2)
    expect("TB a GPU" not in p.stderr, p.stderr)  # refused later, by the CPU reference's limit
    bad = os.path.join(d, "nan.npy")
    save_npy(bad, "<f2", (8, 8, 16), [0.0] * 100 + [float("nan")] + [0.0] * (8 * 8 * 16 - 101))
    one_line(run(*f16, "--w1", bad, "--w2", w2, code=2), "nan.npy", "finite")


@case("gpu")
def ep_ffn_gpu():
    """--experts ffn on the GPU (every visible rank: E 840 divides over 1 to 8): the run checks itself (y on a sample
    against the experts reference, out bit for bit on its own y) and times the experts phase apart."""
    if not has_gpu():
        return 77
    p = run("ep", "-E", 840, "-k", 4, "--tokens", 40, "--hidden-size", 256, "--experts", "ffn", "--inter-size", 64,
            "--routed-scaling-factor", 2.5, "--device", "gpu", "--bench", "--iters", 5, "--warmup", 1, code=0)
    expect("check: pass" in p.stdout and "the FFN's y" in p.stdout, p.stdout[-2000:])
    expect("stage_us experts" in p.stdout, p.stdout[-2000:])
    # Given weights: each rank uploads its own experts' rows of the files (the check reads the files whole).
    d = tmp()
    w1, w2 = ffn_weight_files(d, 16, 64, 32)
    p = run("ep", "--ranks", 1, "-E", 16, "-k", 4, "--tokens", 40, "--hidden-size", 64, "--gen-dtype", "f16", "--experts", "ffn",
            "--w1", w1, "--w2", w2, "--device", "gpu", code=0)
    expect("check: pass" in p.stdout and "expert_weights=given" in p.stdout, p.stdout[-2000:])
