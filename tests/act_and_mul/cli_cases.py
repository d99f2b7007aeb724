"""CLI cases of the act-and-mul family (run by tests/cli/cli_test.py).

The module-level names COMMAND, SMALL_ARGS, BUNDLED_ARGS and OVERSIZED feed the
generic cases there; the @case functions are this family's own.
"""
import math
import os

from cli_harness import DATA, case, expect, load_npy, run, save_npy, tmp


COMMAND = "act-and-mul"
ALIASES = ["act_and_mul"]
SMALL_ARGS = ["--tokens", 2, "--d", 8]
BUNDLED_ARGS = ["--input", os.path.join(DATA, "act_64x2x1024_bf16.npy")]
OVERSIZED = [
    # 2*d overflows int64 when tokens is 0
    (["gen", "act-and-mul", "--tokens", 0, "--d", 1 << 62, "-o", "{out}"], "too large"),
    (["act-and-mul", "--tokens", 0, "--d", 1 << 62, "--device", "cpu"], "too large"),
]


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
def act_options_that_do_not_apply_are_refused():
    # --dtype reinterprets an input file: without one it is an error, not a silent bf16
    p = run("act-and-mul", "--tokens", 4, "--d", 3, "--dtype", "f16", "--device", "cpu", code=2)
    expect("--dtype" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = run("act-and-mul", "--tokens", 4, "--d", 3, "--gen-dtype", "f64", "--device", "cpu", code=2)
    expect("--gen-dtype" in p.stderr and "gen act-and-mul" not in p.stderr, p.stderr)
    d = tmp()
    f = os.path.join(d, "x.npy")
    save_npy(f, "<f4", (2, 4), [0.5] * 8)
    p = run("act-and-mul", "--input", f, "--tokens", 3, "--device", "cpu", code=2)
    expect("--tokens" in p.stderr, p.stderr)


@case()
def act_activation_reported_canonically():
    import json
    p = run("act-and-mul", "--tokens", 2, "--d", 4, "--activation", "gelu_tanh", "--device", "cpu",
            "--format", "json", code=0)
    expect(json.loads(p.stdout)["params"]["activation"] == "gelu-tanh", p.stdout)


@case()
def act_host_memory_checked_before_generating():
    from cli_harness import limited_run
    p = limited_run("act-and-mul", "--tokens", 65536, "--d", 14336, "--device", "cpu", mem_gb=1)
    expect(p.returncode == 2 and "host memory" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
           f"exit {p.returncode}, {p.stderr!r}")
