"""CLI cases of the combine family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import json
import os

from cli_harness import case, expect, load_npy, run, save_npy, tmp


COMMAND = "combine"
SMALL_ARGS = ["--tokens", 3, "--topk", 2, "--hidden-size", 16]
BUNDLED_ARGS = ["--tokens", 64, "--topk", 8, "--hidden-size", 1030, "--routed-scaling-factor", 2.5]
OVERSIZED = [
    (["gen", "combine", "--rows", 1 << 40, "--hidden-size", 1 << 20, "-o", "{out}"], "too large"),
    (["combine", "--tokens", 1 << 40, "--topk", 8, "--hidden-size", 1 << 20, "--device", "cpu"], "too large"),
    (["gen", "inverse", "--tokens", 1 << 40, "--topk", 8, "-o", "{out}"], "too large"),
    (["gen", "topk-weights", "--tokens", 1 << 40, "--topk", 8, "-o", "{out}"], "too large"),
]


def inputs(d, T=3, K=2, H=4, P=5):
    x = os.path.join(d, "x.npy")
    inv = os.path.join(d, "inv.npy")
    w = os.path.join(d, "w.npy")
    save_npy(x, "<f4", (P, H), [float(i) for i in range(P * H)])
    save_npy(inv, "<i4", (T, K), [(t * K + j) % P if (t + j) % 3 else -1 for t in range(T) for j in range(K)])
    save_npy(w, "<f4", (T, K), [0.5 + 0.25 * i for i in range(T * K)])
    return x, inv, w


@case()
def combine_cpu_matches_model():
    d = tmp()
    T, K, H, P = 3, 2, 4, 5
    x, inv, w = inputs(d, T, K, H, P)
    xv, iv, wv = load_npy(x)[1], load_npy(inv)[1], load_npy(w)[1]
    out = os.path.join(d, "o")
    run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", w, "--routed-scaling-factor", 2,
        "--device", "cpu", "--out", out, code=0)
    h, got = load_npy(os.path.join(out, "out.npy"))
    expect(h["shape"] == (T, H), f"{h}")
    for t in range(T):
        for c in range(H):
            want = 2 * sum(wv[t * K + j] * xv[iv[t * K + j] * H + c] for j in range(K) if iv[t * K + j] >= 0)
            expect(abs(got[t * H + c] - want) <= 1e-6 * abs(want), f"[{t},{c}] {got[t * H + c]} vs {want}")


@case()
def combine_bad_input_exits_2():
    d = tmp()
    x, inv, w = inputs(d)
    bad = os.path.join(d, "bad.npy")
    save_npy(bad, "<i4", (3, 2), [0, 1, 2, 5, 0, 0])  # 5 is not a row of 5 rows
    p = run("combine", "--expert-out", x, "--inverse", bad, "--topk-weights", w, "--device", "cpu", code=2)
    expect("neither -1 nor a row" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    save_npy(bad, "<i4", (3, 2), [0, 1, 2, 3, 4, 1])  # row 1 named twice: not an inverse map
    p = run("combine", "--expert-out", x, "--inverse", bad, "--topk-weights", w, "--device", "cpu", code=2)
    expect("both name row 1" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    save_npy(bad, "<f4", (3, 1), [1, 1, 1])
    p = run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", bad, "--device", "cpu", code=2)
    expect("[3, 2]" in p.stderr, p.stderr)
    save_npy(bad, "<f4", (3, 2), [1, 1, float("nan"), 1, 1, 1])
    run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", bad, "--device", "cpu", code=2)
    run("combine", "--expert-out", x, "--device", "cpu", code=2)  # inverse and weights missing
    save_npy(bad, "<f4", (5, 4), [0.0] * 19 + [float("inf")])
    run("combine", "--expert-out", bad, "--inverse", inv, "--topk-weights", w, "--device", "cpu", code=2)


@case()
def combine_zero_tokens_and_gen():
    d = tmp()
    x, inv, w = inputs(d, T=0)
    out = os.path.join(d, "o")
    run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", w, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "out.npy"))[0]["shape"] == (0, 4), "T = 0")
    g = os.path.join(d, "g.npy")
    run("gen", "combine", "--rows", 6, "--hidden-size", 5, "-o", g, code=0)
    expect(load_npy(g)[0]["shape"] == (6, 5), "gen shape")


@case()
def gen_inverse_and_weights_feed_combine():
    d = tmp()
    T, K, H = 37, 3, 8
    x, inv, w = (os.path.join(d, n) for n in ["x.npy", "inv.npy", "w.npy"])
    run("gen", "combine", "--rows", T * K, "--hidden-size", H, "-o", x, code=0)
    run("gen", "inverse", "--tokens", T, "--topk", K, "-o", inv, code=0)
    run("gen", "topk-weights", "--tokens", T, "--topk", K, "-o", w, code=0)
    h, iv = load_npy(inv)
    expect(h["descr"] == "<i4" and h["shape"] == (T, K), f"{h}")
    expect(sorted(iv) == list(range(T * K)), f"not one to one onto the rows: {iv}")
    expect(iv != list(range(T * K)), "not shuffled")
    h, wv = load_npy(w)
    expect(h["descr"] == "<f4" and h["shape"] == (T, K), f"{h}")
    for t in range(T):
        row = wv[t * K:(t + 1) * K]
        expect(all(v > 0 for v in row) and row == sorted(row, reverse=True), f"row {t}: {row}")
        expect(abs(sum(row) - 1) < 1e-5, f"row {t} sums to {sum(row)}")
    run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", w, "--device", "cpu", code=0)
    for g in ["inverse", "topk-weights"]:
        for bad in [["--tokens", -1, "--topk", 2], ["--tokens", 4, "--topk", 0]]:
            p = run("gen", g, *bad, "-o", os.path.join(d, "bad.npy"), code=2)
            expect(len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("moekit:"), p.stderr)
    expect(not os.path.exists(os.path.join(d, "bad.npy")), "a refused gen wrote a file")


@case()
def combine_scaling_param_is_always_a_number():
    # issue 31: params.scaling was the number 1 but the string "2.5": a key's
    # JSON type must not depend on its value.
    for s, want in (("1", 1), ("2.5", 2.5), ("1e-05", 1e-05)):
        o = json.loads(run(COMMAND, *SMALL_ARGS, "--routed-scaling-factor", s, "--device", "cpu",
                           "--format", "json", code=0).stdout)
        v = o["params"]["scaling"]
        expect(type(v) in (int, float) and v == want, f"--routed-scaling-factor {s}: {o['params']}")
