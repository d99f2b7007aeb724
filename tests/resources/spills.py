#!/usr/bin/env python3
"""No product kernel uses local memory (a stack frame: register spills or
local arrays) on sm_90 unless docs/resources.md lists it, with a reason, in its
table under "## Local memory on sm_90". A `make gpu-verify` step; the build's
records are read through `moekit variants --resources --format json`.

  spills.py MOEKIT DOC     check the binary against the doc (exit 1 naming each unlisted kernel)
  spills.py --self-test    the checker on crafted rows and docs (a CPU test)
"""
import json
import re
import subprocess
import sys

ARCH = "sm_90"
HEADING = "## Local memory on sm_90"


def allowed(doc_text):
    """{kernel base name: reason} from the doc's table (first column `name`, last the reason)."""
    out, inside = {}, False
    for line in doc_text.splitlines():
        if line.startswith("## "):
            inside = line.strip() == HEADING
            continue
        if not inside or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([A-Za-z_]\w*)`", cells[0])
        if m:
            out[m.group(1)] = cells[-1] if len(cells) > 1 else ""
    return out


def problems(rows, doc_text):
    """One line per kernel with local memory on ARCH that the doc does not list with a reason."""
    ok = allowed(doc_text)
    bad = {}
    for r in rows:
        if r.get("arch") != ARCH or not r.get("local_bytes"):
            continue
        base = r["kernel"].split("<")[0]
        if not ok.get(base):
            bad.setdefault(base, set()).add(f"{r['op']} {r['variant']}: {r['local_bytes']} bytes")
    return [f"{k}: local memory on {ARCH} ({'; '.join(sorted(v))}), not listed with a reason under "
            f"'{HEADING}' in docs/resources.md" for k, v in sorted(bad.items())]


def self_test():
    doc = f"# x\n{HEADING}\n\n| kernel | bytes | reason |\n| --- | --- | --- |\n| `a_kernel` | 8 | a local array |\n" \
          "| `b_kernel` | 8 |  |\n\n## Other\n| `c_kernel` | 8 | listed under another heading |\n"
    row = lambda k, arch="sm_90", local=8: {"op": "f", "variant": "v", "kernel": k, "arch": arch, "local_bytes": local}
    cases = [
        ([row("a_kernel<int>")], 0),          # listed with a reason
        ([row("b_kernel")], 1),               # listed, no reason
        ([row("c_kernel")], 1),               # under another heading
        ([row("d_kernel<int, 2>")], 1),       # not listed
        ([row("d_kernel", local=0)], 0),      # no local memory
        ([row("d_kernel", arch="sm_80")], 0),  # another architecture
        ([row("a_kernel"), row("d_kernel"), row("d_kernel<long>")], 1),  # one line per kernel
    ]
    failed = 0
    for rows, want in cases:
        got = len(problems(rows, doc))
        if got != want:
            print(f"FAIL {rows}: {got} problems, want {want}")
            failed += 1
    print(f"spills.py self-test: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    out = subprocess.run([argv[1], "variants", "--resources", "--format", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, end="")
        return 1
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    with open(argv[2]) as f:
        bad = problems(rows, f.read())
    for line in bad:
        print(line)
    n = len({r["kernel"] for r in rows if r.get("arch") == ARCH})
    print(f"{n} {ARCH} kernels checked for local memory: {len(bad)} unlisted")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
