"""CLI cases of `moekit variants --resources`, the reports' "resources" member
and `moekit sass` (run by cli_test.py; docs/resources.md).
"""
import csv
import io
import json
import os
import shutil
import subprocess

from cli_harness import MOEKIT, SKIP, case, expect, has_gpu, run, tmp

FAMILIES = []  # set by cli_test.py: the families' cli_cases modules

INT_FIELDS = ["registers", "local_bytes", "static_smem_bytes", "launch_bound"]


def rows_of(op):
    p = run("variants", op, "--resources", "--format", "json", code=0)
    return [json.loads(l) for l in p.stdout.splitlines()]


@case()
def variants_resources_one_object_per_variant_and_kernel():
    gpu = has_gpu()
    for fam in FAMILIES:
        rows = rows_of(fam.COMMAND)
        listed = {json.loads(l)["variant"] for l in run("variants", fam.COMMAND, "--format", "json",
                                                         code=0).stdout.splitlines()}
        # Every variant has rows of its own kernels, or (auto and the other variants that only pick)
        # the text names the variants whose kernels it launches.
        text = run("variants", fam.COMMAND, "--resources", code=0).stdout
        for v in listed - {r["variant"] for r in rows} - {"auto"}:
            expect(any(l.split()[:4] == [v, "launches", "the", "kernels"] for l in text.splitlines()),
                   f"{fam.COMMAND} {v}: no resource rows and no variants named")
        for r in rows:
            expect(r["op"] == fam.COMMAND and r["variant"] in listed, f"{fam.COMMAND}: stray row {r}")
            expect(r["kernel"] and r["mangled"].startswith("_Z"), f"unnamed kernel: {r}")
            expect(isinstance(r["arch"], str) and r["arch"].startswith("sm_"), f"arch: {r}")
            for k in INT_FIELDS:
                expect(isinstance(r[k], int) and r[k] >= 0, f"{k} not a count: {r}")
            expect(1 <= r["registers"] <= 255, f"registers: {r}")
            if not gpu:
                expect(r["runtime"] is None and r["occupancy"] is None, f"runtime numbers without a GPU: {r}")
                expect("needs a device" in r["note"], f"the note does not say occupancy needs a device: {r}")
        keys = [(r["variant"], r["arch"], r["mangled"]) for r in rows]
        expect(len(keys) == len(set(keys)), f"{fam.COMMAND}: a (variant, kernel) row twice")


@case()
def variants_resources_csv_and_text_match_json():
    for fam in FAMILIES:
        rows = rows_of(fam.COMMAND)
        table = list(csv.DictReader(io.StringIO(run("variants", fam.COMMAND, "--resources", "--format", "csv",
                                                    code=0).stdout)))
        expect(len(table) == len(rows), f"{fam.COMMAND}: csv has {len(table)} rows, json {len(rows)}")
        for t, r in zip(table, rows):
            expect(t["mangled"] == r["mangled"] and int(t["registers"]) == r["registers"]
                   and int(t["local_bytes"]) == r["local_bytes"], f"csv {t} vs json {r}")
        text = run("variants", fam.COMMAND, "--resources", code=0).stdout
        for r in rows:
            expect(r["kernel"] in text, f"text lacks {r['kernel']}")
    p = run("variants", "--format", "csv", code=2)
    expect("--resources" in p.stderr, p.stderr)


@case()
def run_report_names_the_variants_kernels_on_the_cpu():
    fam = FAMILIES[0]
    variant = rows_of(fam.COMMAND)[0]["variant"]
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--variant", variant, "--format", "json", code=0)
    res = json.loads(p.stdout)["resources"]
    expect(isinstance(res, list) and res, f"resources: {res}")
    expect(all(r["variant"] == variant and r["occupancy"] is None for r in res), f"resources: {res}")
    p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "cpu", "--format", "json", code=0)
    expect(json.loads(p.stdout)["resources"] is None, "auto on the CPU names no kernels")


@case("gpu")
def run_report_resources_on_the_gpu():
    if not has_gpu():
        return SKIP
    for fam in FAMILIES:
        p = run(fam.COMMAND, *fam.SMALL_ARGS, "--device", "gpu", "--format", "json", code=0)
        res = json.loads(p.stdout)["resources"]
        expect(isinstance(res, list) and res, f"{fam.COMMAND}: resources {res}")
        for r in res:
            expect(r["block"] and r["dynamic_smem_bytes"] is not None, f"launch shape missing: {r}")
            expect(r["runtime"] and r["occupancy"] and r["occupancy"]["blocks_per_sm"] >= 1, f"occupancy: {r}")
            if r["registers"] is not None:
                expect(r["runtime"]["registers"] == r["registers"], f"runtime vs build registers: {r}")


def one_line(p, *words):
    lines = p.stderr.strip().splitlines()
    expect(len(lines) == 1 and lines[0].startswith("moekit: "), f"one error line wanted: {p.stderr!r}")
    for w in words:
        expect(w in lines[0], f"{w!r} not in {lines[0]!r}")


@case()
def sass_errors_are_one_line():
    fam = FAMILIES[0]
    variant = rows_of(fam.COMMAND)[0]["variant"]
    one_line(run("sass", fam.COMMAND, "--variant", "nope", code=2), "nope")
    one_line(run("sass", "nope", "--variant", variant, code=2), "nope")
    one_line(run("sass", fam.COMMAND, "--variant", variant, "--kernel", "no_such_kernel", code=2), "no_such_kernel")
    # Without cuobjdump on PATH: the missing tool, named, exit 2.
    empty = tmp()
    p = subprocess.run([os.path.abspath(MOEKIT), "sass", fam.COMMAND, "--variant", variant], capture_output=True,
                       text=True, env={"PATH": empty}, timeout=60)
    expect(p.returncode == 2, f"exit {p.returncode}: {p.stderr}")
    one_line(p, "cuobjdump")
    expect(p.stdout == "", f"output without a tool: {p.stdout[:200]}")


@case("gpu")
def sass_prints_the_variants_kernels():
    # The GPU machines have the toolkit; cuobjdump reads the binary's own fatbin.
    if shutil.which("cuobjdump") is None:
        return SKIP
    fam = FAMILIES[0]
    r = rows_of(fam.COMMAND)[0]
    p = run("sass", fam.COMMAND, "--variant", r["variant"], code=0)
    expect(r["mangled"] in p.stdout, f"no SASS of {r['mangled']}")
    expect(any(ins in p.stdout for ins in ("EXIT", "RET")), "no instructions")


FAKE_SASS = """
Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

\tcode for sm_90
\t\tFunction : {other}
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;     /* other */
        /*0010*/                   EXIT ;
\t\t..........


\t\tFunction : {mine}
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   S2R R0, SR_TID.X ;     /* mine */
        /*0010*/                   EXIT ;
\t\t..........



Fatbin ptx code:
================
arch = sm_90
.version 9.0
"""


@case()
def sass_keeps_only_the_variants_kernels():
    # A stand-in cuobjdump with a known listing: moekit must print the
    # variant's function under its header and nothing of the other one.
    fam = FAMILIES[0]
    rows = rows_of(fam.COMMAND)
    mine = rows[0]
    other = next(r for r in rows if r["variant"] != mine["variant"] and
                 r["mangled"] not in {x["mangled"] for x in rows if x["variant"] == mine["variant"]})
    d = tmp()
    listing = os.path.join(d, "listing.txt")
    with open(listing, "w") as f:
        f.write(FAKE_SASS.format(other=other["mangled"], mine=mine["mangled"]))
    tool = os.path.join(d, "cuobjdump")
    with open(tool, "w") as f:
        f.write(f"#!/bin/sh\n[ \"$1\" = -sass ] && [ -f \"$2\" ] && exec cat '{listing}'\nexit 9\n")
    os.chmod(tool, 0o755)
    p = subprocess.run([os.path.abspath(MOEKIT), "sass", fam.COMMAND, "--variant", mine["variant"]],
                       capture_output=True, text=True, env={"PATH": d + ":/usr/bin:/bin"}, timeout=60)
    expect(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    expect("/* mine */" in p.stdout and "/* other */" not in p.stdout, p.stdout)
    expect(f"// sm_90 " in p.stdout and mine["mangled"] in p.stdout, p.stdout)
    expect("Fatbin" not in p.stdout and ".version" not in p.stdout, p.stdout)
    # --kernel keeping nothing of the variant is an error before the tool runs.
    p = subprocess.run([os.path.abspath(MOEKIT), "sass", fam.COMMAND, "--variant", mine["variant"], "--kernel",
                        other["mangled"] + "x"], capture_output=True, text=True, env={"PATH": d}, timeout=60)
    expect(p.returncode == 2, f"exit {p.returncode}")
    # The tool failing is one line naming it, exit 2.
    with open(tool, "w") as f:
        f.write("#!/bin/sh\necho 'cuobjdump fatal : broken' >&2\nexit 1\n")
    p = subprocess.run([os.path.abspath(MOEKIT), "sass", fam.COMMAND, "--variant", mine["variant"]],
                       capture_output=True, text=True, env={"PATH": d + ":/usr/bin:/bin"}, timeout=60)
    expect(p.returncode == 2, f"exit {p.returncode}: {p.stderr}")
    one_line(p, "sass: ", "cuobjdump", "broken")
