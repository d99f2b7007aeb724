"""CLI cases of the dedup family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import os

from cli_harness import DATA, case, expect, load_npy, run, save_npy, tmp


COMMAND = "dedup"
SMALL_ARGS = ["--batch", 2, "-M", 2, "--k", 8]
BUNDLED_ARGS = ["--indices", os.path.join(DATA, "dedup_bs115_m2_k2048.npy"), "-M", 2]
OVERSIZED = [
    (["gen", "dedup", "--batch", 1, "-M", 4, "--k", 2000000000, "-o", "{out}"], "too large"),
    (["dedup", "--batch", 1, "-M", 4, "--k", 2000000000, "--device", "cpu"], "too large"),
]


def dedup_model(v, rows, k, M):
    out = []
    for b in range(rows // M):
        s = sorted({x for x in v[b * M * k:(b + 1) * M * k] if x >= 0})
        out += s + [-1] * (M * k - len(s))
    return out


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


@case()
def dedup_generator_options_refused_with_a_file():
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<i4", (4, 4), list(range(16)))
    for extra in [["--batch", 7], ["--k", 3], ["--overlap", 0.1]]:
        p = run("dedup", "--indices", f, "-M", 2, *extra, "--device", "cpu", code=2)
        expect(str(extra[0]) in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case()
def dedup_host_memory_checked_before_generating():
    from cli_harness import limited_run
    p = limited_run("dedup", "--batch", 100000, "-M", 4, "--k", 2048, "--device", "cpu", mem_gb=1)
    expect(p.returncode == 2 and "host memory" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
           f"exit {p.returncode}, {p.stderr!r}")
