#!/usr/bin/env python3
"""End-to-end tests of the moekit binary: exit codes, outputs, report fields.

Usage: cli_test.py MOEKIT DATA_DIR CASE   (CASE 'list' prints the case names)
The cases here hold for every family; each family adds its own from
tests/<family>/cli_cases.py (families.txt lists the folders) and declares the
inputs the generic cases below run it on. Exit 0 pass, 1 fail, 77 skip.
"""
import importlib.util
import json
import os
import sys

from cli_harness import CASES, SKIP, Fail, case, expect, has_gpu, limited_run, run, tmp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_families():
    mods = []
    with open(os.path.join(ROOT, "families.txt")) as fh:
        folders = [l.strip() for l in fh if l.strip() and not l.startswith("#")]
    for folder in folders:
        path = os.path.join(ROOT, "tests", folder, "cli_cases.py")
        spec = importlib.util.spec_from_file_location(f"cli_cases_{folder}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods


FAMILIES = load_families()
import tools_cases  # noqa: E402  (sweeps, records, trace, compare, plot: registers its cases)
tools_cases.FAMILIES = FAMILIES
import resources_cases  # noqa: E402  (variants --resources, report resources, sass)
resources_cases.FAMILIES = FAMILIES


@case()
def help_lists_commands():
    out = run("--help", code=0).stdout
    for sub in [f.COMMAND for f in FAMILIES] + ["gen", "info", "variants", "Exit codes"]:
        expect(sub in out, f"--help does not mention {sub}")
    subs = [["gen"], ["info"], ["variants"]]
    for f in FAMILIES:
        subs += [[f.COMMAND], ["gen", f.COMMAND]]
    for sub in subs:
        o = run(*sub, "--help", code=0).stdout
        expect("--" in o or "Positionals" in o or "POSITIONALS" in o, f"{sub} --help is empty")


@case()
def usage_errors_exit_2():
    run(code=2)
    run("frobnicate", code=2)


@case()
def variants_lists_every_op():
    out = run("variants", code=0).stdout
    want = {f.COMMAND for f in FAMILIES}
    for op in want:
        expect(op in out, f"variants lacks {op}")
    lines = run("variants", "--format", "json", code=0).stdout.splitlines()
    ops = {json.loads(l)["op"] for l in lines}
    expect(ops == want, f"json ops {ops}")
    for l in lines:
        o = json.loads(l)
        expect(o["variant"] and o["description"] and o["limits"], f"incomplete entry {o}")
        expect(isinstance(o["stable_order"], bool), f"stable_order not a bool: {o}")
    for op in want:
        run("variants", op, code=0)
    for f in FAMILIES:
        for alias in getattr(f, "ALIASES", []):
            run("variants", alias, code=0)
    run("variants", "nope", code=2)


@case()
def info_of_a_missing_file_exits_2():
    missing = os.path.join(tmp(), "missing.npy")
    run("info", missing, code=2)
    # JSON: one object per file, a bad one with an error member
    p = run("info", missing, "--format", "json", code=2)
    o = json.loads(p.stdout)
    expect(o["file"] == missing and o["error"]["exit_code"] == 2, p.stdout)


@case()
def oversized_shapes_rejected_before_allocating():
    f = os.path.join(tmp(), "x.npy")
    for fam in FAMILIES:
        for args, word in fam.OVERSIZED:
            args = [f if a == "{out}" else a for a in args]
            p = limited_run(*args)
            msg = f"moekit {' '.join(map(str, args))}: exit {p.returncode}, stderr {p.stderr!r}"
            expect(p.returncode == 2, msg)
            expect(word in p.stderr and "out of host memory" not in p.stderr, msg)
            expect(len(p.stderr.strip().splitlines()) == 1, msg)
    expect(not os.path.exists(f), "a rejected gen left a file behind")


@case()
def unknown_variant_is_exit_2_on_cpu_too():
    for fam in FAMILIES:
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "no-such-variant", code=2)
        expect("no-such-variant" in p.stderr, p.stderr)
        run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", "auto", code=0)


@case()
def parse_errors_are_one_prefixed_line():
    for args in [[FAMILIES[0].COMMAND, *FAMILIES[0].SMALL_ARGS, "--format", "yaml"], ["variants", "--format", "xml"],
                 ["info", "--nope"]]:
        p = run(*args, code=2)
        lines = p.stderr.strip().splitlines()
        expect(len(lines) == 1 and lines[0].startswith("moekit: "), f"{args}: {p.stderr!r}")


@case()
def mistyped_command_gets_a_suggestion():
    for fam in FAMILIES:
        typo = fam.COMMAND + "x"
        p = run(typo, code=2)
        expect(f"did you mean '{fam.COMMAND}'" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@case()
def seeds_never_wrap():
    fam = FAMILIES[0]
    for bad in ["-1", "18446744073709551616", "1.5", "x"]:
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--seed", bad, code=2)
        expect("--seed" in p.stderr, p.stderr)
    run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--seed", "18446744073709551615", code=0)


@case()
def help_reads_defaults_right():
    o = run(FAMILIES[0].COMMAND, "--help", code=0).stdout
    expect("{false}" not in o, "a flag's help reads like a default-off: " + o)


def gpu_variants(op):
    lines = run("variants", op, "--format", "json", code=0).stdout.splitlines()
    return [(o["variant"], o["stable_order"]) for o in map(json.loads, lines)]


@case("gpu")
def gpu_every_variant_on_bundled_inputs():
    if not has_gpu():
        return SKIP
    for fam in FAMILIES:
        op = fam.COMMAND
        for v, stable in gpu_variants(op):
            p = run(op, *fam.BUNDLED_ARGS, "--variant", v, "--device", "gpu", "--format", "json")
            if p.returncode == 2 and "does not apply" in p.stderr:
                continue
            expect(p.returncode == 0, f"{op} {v}: exit {p.returncode}: {p.stderr}")
            o = json.loads(p.stdout)
            expect(o["check"]["result"] == "pass", f"{op} {v}: {o['check']}")
            if stable:  # a stable-order promise is checked bit for bit
                expect(any("bit for bit" in n for n in o["notes"]), f"{op} {v}: not checked exactly: {o['notes']}")
        p = run(op, *fam.BUNDLED_ARGS, "--bench", "--iters", 20, "--format", "json", "--profile", code=0)
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
