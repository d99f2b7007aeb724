#!/usr/bin/env python3
"""kernels/resource_records.py against ptxas: compiles probe.cu for the build's
architectures with --resource-usage, reads what ptxas says of each kernel
(registers, stack frame, static shared memory), and requires the records read
back from the object to say the same; launch bounds against the probe's
source. The comparison is shown to reject a wrong record first.

  records_test.py NVCC... -- SCRIPT PROBE ARCH...
"""
import os
import re
import subprocess
import sys
import tempfile

# __launch_bounds__ of probe.cu's kernels, by name as written there (0: none).
LAUNCH_BOUNDS = {"plain_kernel": 0, "small_smem_kernel": 128, "big_smem_kernel": 256,
                 "local_array_kernel<64>": 0, "local_array_kernel<8>": 0, "dynamic_smem_kernel": 64}


def ptxas_report(text):
    """{(sm, mangled): (registers, stack frame, static smem)} from --resource-usage output."""
    out, cur, props = {}, None, None
    frame = {}
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)", line)
        if m:
            cur = (int(m.group(2)), m.group(1))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and cur and props == cur[1]:
            frame[cur] = int(m.group(1))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            smem = re.search(r"(\d+) bytes smem", line)
            out[cur] = (int(m.group(1)), frame.get(cur, 0), int(smem.group(1)) if smem else 0)
            cur = None
    return out


def read_inc(path):
    """{(sm, mangled): (registers, frame, smem, bound)} of a generated kernel_records.inc."""
    recs = {}
    for line in open(path):
        m = re.match(r'\{(\d+), "([^"]+)", (\d+), (\d+), (\d+), (\d+)\},', line)
        if m:
            recs[(int(m.group(1)), m.group(2))] = tuple(int(m.group(i)) for i in range(3, 7))
    return recs


def demangled(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


def short(d):  # "void local_array_kernel<64>(const float*, ...)" -> "local_array_kernel<64>"
    d = d[5:] if d.startswith("void ") else d
    return d[:d.index("(")]


def differences(expected, recs, names):
    """Lines naming each disagreement between ptxas and the records."""
    bad = []
    for key, (regs, frame, smem) in sorted(expected.items()):
        r = recs.get(key)
        if r is None:
            bad.append(f"sm_{key[0]} {key[1]}: no record")
            continue
        if r[:3] != (regs, frame, smem):
            bad.append(f"sm_{key[0]} {names[key[1]]}: record {r[:3]}, ptxas (registers, frame, smem) "
                       f"{(regs, frame, smem)}")
        want = LAUNCH_BOUNDS.get(short(names[key[1]]))
        if want is None or r[3] != want:
            bad.append(f"sm_{key[0]} {names[key[1]]}: launch bound {r[3]}, the source declares {want}")
    for key in recs.keys() - expected.keys():
        bad.append(f"sm_{key[0]} {key[1]}: recorded, but ptxas compiled no such kernel")
    return bad


def main(argv):
    sep = argv.index("--")
    nvcc, (script, probe, *archs) = argv[1:sep], argv[sep + 1:]
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    with tempfile.TemporaryDirectory() as tmp:
        obj, inc = os.path.join(tmp, "probe.o"), os.path.join(tmp, "probe.inc")
        cc = subprocess.run(nvcc + gencode + ["--resource-usage", "-c", probe, "-o", obj],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            print(cc.stdout + cc.stderr)
            return 1
        expected = ptxas_report(cc.stdout + cc.stderr)
        if len(expected) != len(LAUNCH_BOUNDS) * len(archs):
            print(f"ptxas reported {len(expected)} kernels, want {len(LAUNCH_BOUNDS)} x {len(archs)} archs")
            return 1
        if not any(f > 0 for _, f, _ in expected.values()) or not any(s > 0 for _, _, s in expected.values()):
            print("the probe lost its stack frame or its shared memory: the test would prove nothing")
            return 1
        run = subprocess.run([sys.executable, script, inc, obj], capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stderr)
            return 1
        recs = read_inc(inc)
        names = demangled(sorted({k[1] for k in expected}))
        # The comparison rejects a wrong record (one register off) and a missing one.
        key = next(iter(sorted(expected)))
        wrong = dict(recs)
        wrong[key] = (recs[key][0] + 1,) + recs[key][1:]
        missing = {k: v for k, v in recs.items() if k != key}
        if not differences(expected, wrong, names) or not differences(expected, missing, names):
            print("the comparison accepted a wrong record")
            return 1
        bad = differences(expected, recs, names)
        for line in bad:
            print(line)
        print(f"{len(expected)} kernel records checked against ptxas: {len(bad)} differ")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
