#!/usr/bin/env python3
"""probe_align's usage is true (no GPU needed): `--help` exits 0 and lists every mode, each
mode docs/align.md names for launch shapes is listed, and an unknown or retired mode exits 2
with one `probe_align:` line before the usage.

Usage: probe_usage_test.py PROBE_ALIGN DOCS_ALIGN_MD
"""
import re
import subprocess
import sys


def main():
    exe, doc = sys.argv[1], sys.argv[2]
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0, f"--help exited {h.returncode}: {h.stderr}"
    modes = re.findall(r"^  (\S+)", h.stdout, re.M)
    assert len(modes) >= 10, f"--help lists {modes}"
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"for launch shapes, (`probe_align .*?)\(`probe_align --help`", text, re.S)
    assert m, "docs/align.md: the sentence listing probe_align's modes is gone"
    named = re.findall(r"`(?:probe_align )?([a-z0-9]+)(?: FILE\.csv)?`", m.group(1))
    missing = [n for n in named if n not in modes]
    assert named and not missing, f"docs/align.md names modes --help does not list: {missing}"
    for bad in ["phases", "trigger", "no-such-mode"]:
        r = subprocess.run([exe, bad], capture_output=True, text=True, timeout=60)
        first = r.stderr.splitlines()[0] if r.stderr else ""
        assert r.returncode == 2, f"`probe_align {bad}` exited {r.returncode}"
        assert first == f"probe_align: unknown mode '{bad}'", f"`probe_align {bad}`: {first!r}"
        assert "usage: probe_align" in r.stderr
    print(f"probe_align --help lists {len(modes)} modes; docs/align.md names {len(named)}, all listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
