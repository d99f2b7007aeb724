"""CLI cases of the route family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own, checked
against the independent float64 model below.
"""
import math
import os

from cli_harness import DATA, case, expect, load_npy, run, save_npy, tmp


COMMAND = "route"
SMALL_ARGS = ["--tokens", 3, "-E", 16, "--topk", 2]
BUNDLED_ARGS = ["--logits", os.path.join(DATA, "route_logits_64x256.npy"), "--topk", 8, "--scoring", "sigmoid",
                "--correction-bias", os.path.join(DATA, "route_bias_256.npy"), "--num-groups", 8,
                "--topk-groups", 4, "--renormalize", "--routed-scaling-factor", 2.5]
OVERSIZED = [
    (["gen", "route", "--tokens", 1 << 40, "-E", 256, "-o", "{out}"], "too large"),
    (["route", "--tokens", 1 << 40, "-E", 256, "--topk", 8, "--device", "cpu"], "too large"),
]


def model(row, k, scoring="softmax", bias=None, groups=1, kg=None, renorm=False, scale=1.0):
    """topk ids and weights of one row (docs/route.md), float64."""
    E = len(row)
    if scoring == "softmax":
        m = max(row)
        e = [math.exp(x - m) for x in row]
        s = [v / sum(e) for v in e]
    else:
        s = [1.0 / (1.0 + math.exp(-x)) for x in row]
    c = [s[i] + (bias[i] if bias else 0.0) for i in range(E)]
    gs = E // groups
    kept = set(range(groups))
    if groups > 1:
        def gscore(g):
            v = sorted(c[g * gs:(g + 1) * gs], reverse=True)
            return v[0] + v[1] if bias and gs >= 2 else v[0]
        kept = set(sorted(range(groups), key=lambda g: (-gscore(g), g))[:kg])
    cand = [i for i in range(E) if i // gs in kept]
    ids = sorted(cand, key=lambda i: (-c[i], i))[:k]
    w = [s[i] for i in ids]
    tot = sum(w)
    return ids, [(x / tot if renorm else x) * scale for x in w]


def logits_file(d, T, E, seed=1):
    f = os.path.join(d, f"logits_{T}x{E}.npy")
    vals = [(((i + seed) * 2654435761) % 10007) / 1000.0 - 5.0 for i in range(T * E)]
    save_npy(f, "<f4", (T, E), vals)
    return f, load_npy(f)[1]


@case()
def route_cpu_matches_model():
    d = tmp()
    T, E = 5, 32
    f, vals = logits_file(d, T, E)
    bias_f = os.path.join(d, "bias.npy")
    save_npy(bias_f, "<f4", (E,), [((i * 37) % 11 - 5) / 50.0 for i in range(E)])
    bias = load_npy(bias_f)[1]
    configs = [
        (dict(k=4), []),
        (dict(k=3, renorm=True, scale=2.0), ["--renormalize", "--routed-scaling-factor", 2]),
        (dict(k=4, scoring="sigmoid", bias=bias, groups=4, kg=2, renorm=True, scale=2.5),
         ["--scoring", "sigmoid", "--correction-bias", bias_f, "--num-groups", 4, "--topk-groups", 2,
          "--renormalize", "--routed-scaling-factor", 2.5]),
        (dict(k=2, groups=8, kg=3), ["--num-groups", 8, "--topk-groups", 3]),  # group max without a bias
        (dict(k=E), []),  # K = E
    ]
    out = os.path.join(d, "o")
    for kw, args in configs:
        run("route", "--logits", f, "--topk", kw["k"], *args, "--device", "cpu", "--out", out, code=0)
        hi, ids = load_npy(os.path.join(out, "topk_ids.npy"))
        hw, w = load_npy(os.path.join(out, "topk_weights.npy"))
        K = kw["k"]
        expect(hi["shape"] == (T, K) and hi["descr"] == "<i4" and hw["descr"] == "<f4", f"{hi} {hw}")
        for t in range(T):
            want_ids, want_w = model(vals[t * E:(t + 1) * E], **kw)
            expect(ids[t * K:(t + 1) * K] == want_ids, f"{args} token {t}: {ids[t * K:(t + 1) * K]} vs {want_ids}")
            for j in range(K):
                expect(abs(w[t * K + j] - want_w[j]) <= 1e-6 * abs(want_w[j]), f"{args} [{t},{j}]")


@case()
def route_ties_go_to_the_lower_index():
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<f4", (2, 6), [1, 3, 3, 0, 3, 1, 2, 2, 2, 2, 2, 2])
    out = os.path.join(d, "o")
    run("route", "--logits", f, "--topk", 3, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "topk_ids.npy"))[1] == [1, 2, 4, 0, 1, 2], "ties")
    # groups of two with equal scores: the lower group wins
    run("route", "--logits", f, "--topk", 2, "--num-groups", 3, "--topk-groups", 1, "--device", "cpu",
        "--out", out, code=0)
    expect(load_npy(os.path.join(out, "topk_ids.npy"))[1] == [1, 0, 0, 1], "group ties")


@case()
def route_bad_input_exits_2():
    d = tmp()
    f, _ = logits_file(d, 2, 8)
    for args, word in [
        (["--topk", 9], "--topk"),
        (["--topk", 2, "--num-groups", 3], "divide"),
        (["--topk", 2, "--num-groups", 4, "--topk-groups", 5], "--topk-groups"),
        (["--topk", 5, "--num-groups", 4, "--topk-groups", 2], "kept group"),
        (["--topk", 2, "-E", 16], "-E"),
        (["--topk", 2, "--routed-scaling-factor", "1e39"], "finite"),
        (["--topk", 2, "--then-align"], "--block-size"),
    ]:
        p = run("route", "--logits", f, *args, "--device", "cpu", code=2)
        expect(word in p.stderr and len(p.stderr.strip().splitlines()) == 1, f"{args}: {p.stderr}")
    nan = os.path.join(d, "nan.npy")
    save_npy(nan, "<f4", (2, 4), [0, 1, 2, float("nan"), 0, 0, 0, 0])
    p = run("route", "--logits", nan, "--topk", 1, "--device", "cpu", code=2)
    expect("finite" in p.stderr and "[0, 3]" in p.stderr, p.stderr)
    inf = os.path.join(d, "inf.npy")
    save_npy(inf, "<f4", (1, 4), [0, float("-inf"), 2, 0])
    run("route", "--logits", inf, "--topk", 1, "--device", "cpu", code=2)
    one_d = os.path.join(d, "one.npy")
    save_npy(one_d, "<f4", (4,), [0, 1, 2, 3])
    p = run("route", "--logits", one_d, "--topk", 1, "--device", "cpu", code=2)
    expect("2-D" in p.stderr, p.stderr)
    ints = os.path.join(d, "ints.npy")
    save_npy(ints, "<i4", (1, 4), [0, 1, 2, 3])
    run("route", "--logits", ints, "--topk", 1, "--device", "cpu", code=2)
    bias = os.path.join(d, "b.npy")
    save_npy(bias, "<f4", (7,), [0] * 7)
    p = run("route", "--logits", f, "--topk", 1, "--correction-bias", bias, "--device", "cpu", code=2)
    expect("[E] = [8]" in p.stderr, p.stderr)
    save_npy(bias, "<f4", (8,), [0, 0, 0, float("inf"), 0, 0, 0, 0])
    run("route", "--logits", f, "--topk", 1, "--correction-bias", bias, "--device", "cpu", code=2)


@case()
def route_zero_and_one_token_then_align():
    d = tmp()
    out = os.path.join(d, "o")
    for T in (0, 1):
        f, vals = logits_file(d, T, 16)
        run("route", "--logits", f, "--topk", 4, "--then-align", "-B", 4, "--device", "cpu", "--out", out, code=0)
        names = sorted(os.listdir(out))
        expect(names == ["expert_ids.npy", "num_tokens_post_pad.npy", "sorted_token_ids.npy", "topk_ids.npy",
                         "topk_weights.npy"], f"{names}")
        expect(load_npy(os.path.join(out, "topk_ids.npy"))[0]["shape"] == (T, 4), "shape")
        ntpp = load_npy(os.path.join(out, "num_tokens_post_pad.npy"))[1][0]
        expect(ntpp == 16 * T, f"T={T}: 4 distinct experts of one token pad to 4 blocks of 4: {ntpp}")
        if T == 1:
            ids = load_npy(os.path.join(out, "topk_ids.npy"))[1]
            eids = load_npy(os.path.join(out, "expert_ids.npy"))[1][:4]
            expect(eids == sorted(ids), f"{eids} vs {ids}")


@case()
def route_generated_and_gen():
    d = tmp()
    f = os.path.join(d, "g.npy")
    run("gen", "route", "--tokens", 4, "-E", 64, "--dtype", "bf16", "--seed", 3, "-o", f, code=0)
    h, _ = load_npy(f)
    expect(h["shape"] == (4, 64), f"{h}")
    b = os.path.join(d, "b.npy")
    run("gen", "route", "--bias", "-E", 64, "-o", b, code=0)
    expect(load_npy(b)[0]["shape"] == (64,), "bias shape")
    run("route", "--logits", f, "--dtype", "bf16", "--topk", 6, "--correction-bias", b, "--scoring", "sigmoid",
        "--device", "cpu", code=0)
    run("route", "--tokens", 9, "-E", 64, "--topk", 6, "--gen-dtype", "f16", "--device", "cpu", code=0)
    run("gen", "route", "-E", 64, "-o", f, code=2)  # neither tokens nor --bias


@case()
def route_fused_variant_needs_then_align():
    p = run("route", *SMALL_ARGS, "--variant", "block-rank-align", "--device", "cpu", code=2)
    expect("--then-align" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    run("route", *SMALL_ARGS, "--variant", "block-rank-align", "--then-align", "-B", 8, "--device", "cpu", code=0)
    p = run("route", "--tokens", 2000, "-E", 64, "--topk", 8, "--variant", "block-rank-align", "--then-align",
            "-B", 8, "--device", "cpu", code=2)
    expect("8192" in p.stderr, p.stderr)


@case()
def route_align_variant_checked_on_cpu():
    # Only --variant was checked on the CPU: --align-variant nosuch exited 0.
    for args in (["--align-variant", "nosuch"], ["--variant", "auto", "--align-variant", "nosuch"]):
        p = run("route", *SMALL_ARGS, "--then-align", "-B", 8, *args, "--device", "cpu", code=2)
        lines = p.stderr.strip().splitlines()
        expect(len(lines) == 1 and "nosuch" in lines[0] and "--align-variant" in lines[0], p.stderr)
    run("route", *SMALL_ARGS, "--then-align", "-B", 8, "--align-variant", "baseline", "--device", "cpu", code=0)


@case()
def route_renormalize_all_zero_sigmoid_scores():
    # sigmoid(-1000) = 0 for every expert: renormalizing divided 0 by 0 (NaN
    # weights, exit 0; with --out the file check then failed on NaN != NaN).
    # The sum is not > 0, so the weights stay 0 (docs/route.md).
    d = tmp()
    T, E, K = 3, 8, 2
    f = os.path.join(d, "low.npy")
    save_npy(f, "<f4", (T, E), [-1000.0] * (T * E))
    out = os.path.join(d, "o")
    run("route", "--logits", f, "--topk", K, "--scoring", "sigmoid", "--renormalize", "--routed-scaling-factor",
        2.5, "--device", "cpu", "--out", out, code=0)
    _, ids = load_npy(os.path.join(out, "topk_ids.npy"))
    _, w = load_npy(os.path.join(out, "topk_weights.npy"))
    expect(ids == [0, 1] * T, f"ids {ids}")  # all tied: the lower indices
    expect(w == [0.0] * (T * K), f"weights {w}")
