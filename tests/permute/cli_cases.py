"""CLI cases of the permute family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import json
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


def permute_run(d, ids, T, K, E, extra, B=2, layout="padded", H=3):
    """Runs permute on the CPU on hidden rows of T x H and the given ids; returns the outputs."""
    hid, f = os.path.join(d, "h.npy"), os.path.join(d, "ids.npy")
    save_npy(hid, "<f4", (T, H), [float(i % 97) - 40.0 for i in range(T * H)])
    save_npy(f, "<i4", (T, K), ids)
    out = os.path.join(d, "o-" + layout)
    p = run("permute", "--hidden", hid, "--topk-ids", f, "-E", E, "-B", B, "--layout", layout, "--device", "cpu",
            "--out", out, "--format", "json", *extra, code=0)
    o = {"report": json.loads(p.stdout), "hidden": load_npy(hid)[1]}
    for name in ("permuted", "inverse", "expert_ids", "num_tokens_post_pad", "expert_offsets"):
        path = os.path.join(out, name + ".npy")
        if os.path.exists(path):
            o[name] = load_npy(path)[1]
    return o


def rows_match(o, K, H=3):
    for s, r in enumerate(o["inverse"]):
        if r >= 0:
            expect(o["permuted"][r * H:(r + 1) * H] == o["hidden"][(s // K) * H:(s // K + 1) * H], f"slot {s} row {r}")


@case()
def permute_invalid_modes():
    d = tmp()
    ids = [2, -1, 0, 3, 2, 1, 7, 0]  # T = 4, K = 2, E = 3: -1, 3 and 7 are invalid
    p = run("permute", "--hidden", os.path.join(d, "nope.npy"), "--topk-ids", os.path.join(d, "nope.npy"), "-E", 3,
            "--invalid", "sometimes", "--device", "cpu", code=2)
    expect("--invalid" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    # bucket: every slot copied, the bucket's rows after the experts' (padded: blocks of -1)
    o = permute_run(d, ids, 4, 2, 3, ["--invalid", "bucket"])
    expect(o["inverse"] == [4, 6, 0, 7, 5, 2, 8, 1] and o["num_tokens_post_pad"] == [10], o["inverse"])
    expect(o["expert_ids"][:5] == [0, 1, 2, -1, -1], o["expert_ids"])
    expect(o["report"]["params"]["invalid"] == "bucket" and o["report"]["params"]["map_semantics"] == "local",
           o["report"]["params"])
    rows_match(o, 2)
    # compact: the bucket's rows from offsets[E] on
    o = permute_run(d, ids, 4, 2, 3, ["--invalid", "bucket"], layout="compact")
    expect(o["expert_offsets"] == [0, 2, 3, 5] and len(o["permuted"]) == 8 * 3, o["expert_offsets"])
    rows_match(o, 2)
    # drop: inverse -1, no row
    for layout in ("padded", "compact"):
        o = permute_run(d, ids, 4, 2, 3, ["--invalid", "drop"], layout=layout)
        expect([o["inverse"][i] for i in (1, 3, 6)] == [-1, -1, -1] and min(o["inverse"][i] for i in (0, 2, 4, 5, 7)) >= 0,
               o["inverse"])
        expect(len(o["permuted"]) == (6 if layout == "padded" else 5) * 3, f"{layout}: {len(o['permuted'])}")
        rows_match(o, 2)
    # int64 ids far outside int32 are invalid like any other
    hid, f = os.path.join(d, "h.npy"), os.path.join(d, "i64.npy")
    save_npy(f, "<i8", (4, 2), [2, 1 << 40, 0, 3, 2, 1, -(1 << 35), 0])
    p = run("permute", "--hidden", hid, "--topk-ids", f, "-E", 3, "--device", "cpu", code=2)
    expect(str(1 << 40) in p.stderr and "[0, 1]" in p.stderr, p.stderr)
    run("permute", "--hidden", hid, "--topk-ids", f, "-E", 3, "--invalid", "bucket", "--device", "cpu", code=0)


@case()
def permute_expert_map():
    d = tmp()
    m = os.path.join(d, "map.npy")
    ids = [3, 0, 2, 0, 1, 3]  # T = 3, K = 2
    save_npy(m, "<i4", (4,), [1, -1, 0, -1])  # 4 global experts, 2 local
    # local (default): non-local slots dropped (inverse -1), or with the bucket copied after the experts
    o = permute_run(d, ids, 3, 2, 2, ["--expert-map", m])
    expect(o["inverse"][0] == -1 and o["inverse"][4] == -1 and o["inverse"][5] == -1, o["inverse"])
    expect(o["report"]["params"]["expert_map"] == 4, o["report"]["params"])
    o = permute_run(d, ids, 3, 2, 2, ["--expert-map", m, "--invalid", "bucket"])
    expect(all(r >= 0 for r in o["inverse"]) and o["expert_ids"][:4] == [0, 1, -1, -1], f"{o['inverse']} {o['expert_ids']}")
    rows_match(o, 2)
    # vllm: E global; every slot copied, non-local experts' blocks read -1
    o = permute_run(d, ids, 3, 2, 4, ["--expert-map", m, "--map-semantics", "vllm"])
    expect(o["inverse"] == [6, 0, 4, 1, 2, 7] and o["expert_ids"][:4] == [1, -1, 0, -1], f"{o['inverse']} {o['expert_ids']}")
    expect(o["report"]["params"]["map_semantics"] == "vllm", o["report"]["params"])
    rows_match(o, 2)
    o = permute_run(d, ids, 3, 2, 4, ["--expert-map", m, "--map-semantics", "vllm"], layout="compact")
    expect(o["expert_offsets"] == [0, 2, 3, 4, 6], o["expert_offsets"])  # per global expert
    # a vllm map whose length is not E: one line naming the file
    hid, f = os.path.join(d, "h.npy"), os.path.join(d, "ids.npy")
    p = run("permute", "--hidden", hid, "--topk-ids", f, "-E", 3, "--expert-map", m, "--map-semantics", "vllm",
            "--device", "cpu", code=2)
    expect(m in p.stderr and "vllm" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case("gpu")
def permute_ep_modes_on_gpu():
    from cli_harness import SKIP, has_gpu
    if not has_gpu():
        return SKIP
    d = tmp()
    hid, f, m = os.path.join(d, "h.npy"), os.path.join(d, "ids.npy"), os.path.join(d, "map.npy")
    T, K, H = 300, 4, 136
    save_npy(hid, "<f4", (T, H), [float(i % 89) for i in range(T * H)])
    save_npy(f, "<i4", (T, K), [(-1 if i % 13 == 0 else 70 if i % 29 == 0 else (i * 7) % 64) for i in range(T * K)])
    save_npy(m, "<i4", (64,), [(-1 if g % 3 == 0 else g % 32) for g in range(64)])
    for layout in ("padded", "compact"):
        for extra in (["--invalid", "bucket", "-E", 64], ["--invalid", "drop", "-E", 64],
                      ["--invalid", "bucket", "--expert-map", m, "-E", 32],
                      ["--invalid", "drop", "--expert-map", m, "--map-semantics", "vllm", "-E", 64]):
            p = run("permute", "--hidden", hid, "--topk-ids", f, "-B", 16, "--layout", layout, *extra, "--device", "gpu",
                    "--format", "json", code=0)
            o = json.loads(p.stdout)
            expect(o["check"]["result"] == "pass", f"{layout} {extra}: {o['check']}")
