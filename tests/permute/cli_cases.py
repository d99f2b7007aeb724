"""CLI cases of the permute family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import os

from cli_harness import DATA, case, expect, load_npy, run, save_npy, tmp


COMMAND = "permute"
SMALL_ARGS = ["--tokens", 3, "--topk", 2, "-E", 8, "--hidden-size", 16]
# Generated: no bundled hidden states (data/ stays small); ids come from the same seed.
BUNDLED_ARGS = ["--tokens", 64, "--topk", 8, "-E", 256, "--hidden-size", 1030, "-B", 16]
OVERSIZED = [
    (["gen", "permute", "--tokens", 1 << 40, "--hidden-size", 1 << 20, "-o", "{out}"], "too large"),
    (["permute", "--tokens", 1 << 40, "--topk", 8, "-E", 256, "--hidden-size", 1 << 20, "--device", "cpu"],
     "too large"),
]


def files(d, T=5, K=2, H=3):
    hid = os.path.join(d, "h.npy")
    ids = os.path.join(d, "ids.npy")
    vals = [float(i % 97) - 40.0 for i in range(T * H)]
    save_npy(hid, "<f4", (T, H), vals)
    save_npy(ids, "<i4", (T, K), [(t * 3 + j * 5) % 4 for t in range(T) for j in range(K)])
    return hid, ids, load_npy(hid)[1], load_npy(ids)[1]


@case()
def permute_layouts_on_cpu():
    d = tmp()
    T, K, H, E = 5, 2, 3, 4
    hid, ids, hv, iv = files(d, T, K, H)
    for layout in ("padded", "compact"):
        out = os.path.join(d, layout)
        run("permute", "--hidden", hid, "--topk-ids", ids, "-E", E, "-B", 4, "--layout", layout, "--device", "cpu",
            "--out", out, code=0)
        hp, perm = load_npy(os.path.join(out, "permuted.npy"))
        hi, inv = load_npy(os.path.join(out, "inverse.npy"))
        expect(hi["shape"] == (T, K) and hp["shape"][1] == H, f"{hi} {hp}")
        for s in range(T * K):
            r = inv[s]
            expect(perm[r * H:(r + 1) * H] == hv[(s // K) * H:(s // K + 1) * H], f"{layout} slot {s} row {r}")
        if layout == "compact":
            off = load_npy(os.path.join(out, "expert_offsets.npy"))[1]
            counts = [iv.count(e) for e in range(E)]
            expect(off == [sum(counts[:e]) for e in range(E + 1)], f"offsets {off} vs counts {counts}")
            expect(hp["shape"][0] == T * K, f"compact rows {hp}")
        else:
            ntpp = load_npy(os.path.join(out, "num_tokens_post_pad.npy"))[1][0]
            expect(hp["shape"][0] == ntpp, f"padded rows {hp} vs {ntpp}")


@case()
def permute_bad_input_exits_2():
    d = tmp()
    hid, ids, _, _ = files(d)
    p = run("permute", "--hidden", hid, "--topk-ids", ids, "-E", 3, "--device", "cpu", code=2)  # id 3 >= E
    expect("outside [0, 3)" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    short = os.path.join(d, "short.npy")
    save_npy(short, "<i4", (4, 2), [0] * 8)
    p = run("permute", "--hidden", hid, "--topk-ids", short, "-E", 4, "--device", "cpu", code=2)
    expect("[T, K]" in p.stderr, p.stderr)
    run("permute", "--hidden", hid, "-E", 4, "--device", "cpu", code=2)  # ids missing
    run("permute", "--hidden", ids, "--topk-ids", ids, "-E", 4, "--device", "cpu", code=2)  # int hidden


@case()
def permute_zero_tokens_and_gen():
    d = tmp()
    hid, ids, _, _ = files(d, T=0)
    out = os.path.join(d, "o")
    run("permute", "--hidden", hid, "--topk-ids", ids, "-E", 4, "--device", "cpu", "--out", out, code=0)
    expect(load_npy(os.path.join(out, "inverse.npy"))[0]["shape"] == (0, 2), "T = 0")
    g = os.path.join(d, "g.npy")
    run("gen", "permute", "--tokens", 3, "--hidden-size", 7, "--dtype", "bf16", "-o", g, code=0)
    expect(load_npy(g)[0]["shape"] == (3, 7), "gen shape")
