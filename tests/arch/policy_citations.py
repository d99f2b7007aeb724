#!/usr/bin/env python3
"""The lab notebook stays out of the product (issue #30, item 5).

1. Every policy row in kernels/*/policy.hpp (`inline constexpr Policy kPolicySm<NN>`)
   has a comment block right above it that cites the record it was fitted on:
       record: <file> "<key>"
   where <file> is a committed bench/results/*.jsonl or docs/bench/*.md and <key>
   finds the cells in it (a Markdown heading containing the key; in a .jsonl a
   record with a string value equal to the key, e.g. its "table"), or, where no
   record was kept,
       fitted on <commit> (record not kept)
   Every such citation in kernels/*/policy.hpp and kernels/*/registry.cu is
   checked, not only the first of a block.
2. No comment under kernels/ carries a µs figure (a number with `us`/`µs`, or
   two decimals compared with `vs`, `against` or `->`), except in a design
   header that declares exactly how many such lines it keeps (MARKER below:
   why an alternative design lost, not a tuned threshold); never in a
   policy.hpp or registry.cu.

Usage: policy_citations.py SOURCE_ROOT        (exit 1 on a violation, naming it)
       policy_citations.py --self-test        (the checkers on crafted text)
"""
import json
import os
import re
import subprocess
import sys

# A design header may keep µs figures in comments that say why an alternative
# design lost (not a tuned threshold) if it declares how many lines, in a line
#     // Comments here keep µs figures: N lines (...)
# The count must match exactly, so it only goes down as lines go. (Kept in the
# header, not listed here: this file names no family; tests/arch/family_footprint.py.)
MARKER = re.compile(r"Comments here keep µs figures: (\d+) lines?\b")
ROW_FILES = ("policy.hpp", "registry.cu")  # no µs figure at all, marker or not

US_FIGURE = re.compile(
    r"\d(?:\.\d+)?\s*(?:µs|us)\b"                               # 1.40 us, 0.3-1.1 µs
    r"|\d+\.\d+\s*(?:/\s*\d+\.\d+\s*)?(?:vs\.?|against|->)\s*\d+\.\d+")  # 1.53 against 2.28
CITATION = re.compile(r'((?:bench/results|docs/bench)/[\w.-]+\.(?:jsonl|md))\s*,?\s*(?:tables?\s+|sections?\s+)?"([^"]+)"')
# A further key of the last file cited: `table "..."` / `tables "..." and "..."`.
MORE_KEYS = re.compile(r'(?:\b(?:tables?|sections?|and)|,)\s+"([^"]+)"')
FILE = re.compile(r"(?:bench/results|docs/bench)/[\w.-]+\.(?:jsonl|md)")
RECORD = re.compile(r"\brecord:\s*(\S+)", re.IGNORECASE)
NOT_KEPT = re.compile(r"fitted on ([0-9a-f]{7,40}) \(record not kept\)")
BARE_NOTES = re.compile(r'(?<![\w/.-])[\w-]+\.(?:md|jsonl)\s*"')
ROW = re.compile(r"^\s*inline\s+constexpr\s+\w+\s+(kPolicySm\d+)\s*=")


def comment_of(line):
    """The comment text of one C++ line ('' if none; // only, as in kernels/)."""
    i = line.find("//")
    return line[i + 2:].lstrip("/!<").strip() if i >= 0 else ""


def row_blocks(text):
    """(row name, line number, comment block joined) for each policy row."""
    lines = text.splitlines()
    out = []
    for n, line in enumerate(lines):
        m = ROW.match(line)
        if not m:
            continue
        k = n - 1
        block = []
        while k >= 0 and lines[k].lstrip().startswith("//"):
            block.insert(0, comment_of(lines[k]))
            k -= 1
        out.append((m.group(1), n + 1, " ".join(block)))
    return out


def comments_joined(text):
    """Every run of comment lines, joined (citations may wrap): (first line, text)."""
    runs, cur, first = [], [], 0
    for n, line in enumerate(text.splitlines()):
        c = comment_of(line)
        if c:
            if not cur:
                first = n + 1
            cur.append(c)
        elif cur:
            runs.append((first, " ".join(cur)))
            cur = []
    if cur:
        runs.append((first, " ".join(cur)))
    return runs


def string_values(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from string_values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from string_values(v)


def key_found(root, rel, key):
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        if rel.endswith(".md"):
            return any(l.startswith("#") and key in l for l in f)
        for line in f:
            line = line.strip()
            if line and key in line and key in set(string_values(json.loads(line))):
                return True
    return False


def commit_known(root, rev):
    """True where git confirms the commit; None where git cannot tell (no .git)."""
    if not os.path.isdir(os.path.join(root, ".git")) and not os.path.isfile(os.path.join(root, ".git")):
        return None
    r = subprocess.run(["git", "-C", root, "cat-file", "-e", rev + "^{commit}"], capture_output=True)
    return r.returncode == 0


def cited_keys(c):
    """(file, key) for every key of a comment: the key right after a file, and each later
    `table "..."`, `tables "..." and "..."` or `, "..."`, of the last file named before it."""
    out, firsts = [], set()
    for m in CITATION.finditer(c):
        out.append((m.group(1), m.group(2)))
        firsts.add(m.span(2))
    for m in MORE_KEYS.finditer(c):
        files = [f for f in FILE.finditer(c) if f.end() <= m.start()]
        if m.span(1) not in firsts and files:
            out.append((files[-1].group(0), m.group(1)))
    return out


def check_citations(root, rel, text):
    """Problems with the citations in one file's comments."""
    bad = []
    for first, c in comments_joined(text):
        for f, key in cited_keys(c):
            if not os.path.isfile(os.path.join(root, f)):
                bad.append(f"{rel}:{first}: cites {f}, which does not exist")
            elif not key_found(root, f, key):
                bad.append(f'{rel}:{first}: cites {f} "{key}", which finds nothing in it')
        for m in RECORD.finditer(c):
            if not CITATION.match(c, m.start(1)):
                bad.append(f"{rel}:{first}: 'record:' not followed by <file> \"<key>\": {m.group(1)}")
        for m in BARE_NOTES.finditer(c):
            bad.append(f"{rel}:{first}: cite records by their path (docs/bench/... or bench/results/...): "
                       f"{m.group(0)}")
        for m in NOT_KEPT.finditer(c):
            if commit_known(root, m.group(1)) is False:
                bad.append(f"{rel}:{first}: fitted on {m.group(1)}: no such commit")
    return bad


def check_rows(rel, text):
    bad = []
    for name, n, block in row_blocks(text):
        cited = any(CITATION.match(block, m.start(1)) for m in RECORD.finditer(block)) or NOT_KEPT.search(block)
        if not block:
            bad.append(f"{rel}:{n}: policy row {name} has no comment block above it")
        elif not cited:
            bad.append(f"{rel}:{n}: policy row {name}: its comment block cites no record "
                       "('record: <file> \"<key>\"' or 'fitted on <commit> (record not kept)')")
    return bad


def us_lines(text):
    return [(n + 1, line.strip()) for n, line in enumerate(text.splitlines()) if US_FIGURE.search(comment_of(line))]


def kernel_sources(root):
    top = os.path.join(root, "kernels")
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".hpp", ".cuh", ".cu", ".h")):
                p = os.path.join(d, f)
                yield os.path.relpath(p, root).replace(os.sep, "/"), p


def check_tree(root):
    bad = []
    rows = 0
    for rel, path in kernel_sources(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = rel.rsplit("/", 1)[1]
        if name == "policy.hpp":
            rows += len(row_blocks(text))
            bad += check_rows(rel, text)
        if name in ("policy.hpp", "registry.cu"):
            bad += check_citations(root, rel, text)
        hits = us_lines(text)
        marks = MARKER.findall(text)
        most = int(marks[0]) if marks and name not in ROW_FILES else 0
        if len(marks) > 1:
            bad.append(f"{rel}: {len(marks)} 'Comments here keep µs figures' lines: one at most")
        if len(hits) > most:
            where = "; ".join(f"{n}: {l[:70]}" for n, l in hits[:4])
            bad.append(f"{rel}: {len(hits)} comment line(s) with a µs figure (declared {most}): {where}")
        elif len(hits) < most:
            bad.append(f"{rel}: {len(hits)} comment line(s) with a µs figure: lower its declared count from {most}")
    if rows == 0:
        bad.append("no policy rows found under kernels/*/policy.hpp")
    return bad


def self_test():
    """The checkers reject crafted wrong text and accept crafted right text."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs/bench"))
        os.makedirs(os.path.join(root, "bench/results"))
        with open(os.path.join(root, "docs/bench/x-notes.md"), "w") as f:
            f.write("# x\n\n## tiny re-fit (H200)\n\ntext \"not a heading\"\n")
        with open(os.path.join(root, "bench/results/x.jsonl"), "w") as f:
            f.write(json.dumps({"table": "E=8 topk=2 uniform", "variant": "tiny"}) + "\n")
        row = "inline constexpr Policy kPolicySm90 = {};\n"
        good = [
            '// sm_90: record: docs/bench/x-notes.md "tiny re-fit", 512 threads.\n' + row,
            '// sm_90: record: bench/results/x.jsonl table\n// "E=8 topk=2 uniform", tokens 1..64.\n' + row,
            '// record: docs/bench/x-notes.md "tiny re-fit"; bench/results/x.jsonl tables\n'
            '// "E=8 topk=2 uniform" and "E=8 topk=2 uniform".\n' + row,
            "// fitted on 0123abc (record not kept)\n" + row,
        ]
        wrong = {
            "missing file": '// record: docs/bench/y-notes.md "tiny re-fit"\n' + row,
            "missing key": '// record: docs/bench/x-notes.md "tiny sweep"\n' + row,
            "key not a heading": '// record: docs/bench/x-notes.md "not a heading"\n' + row,
            "jsonl key": '// record: bench/results/x.jsonl table "E=8 topk=8 uniform"\n' + row,
            "bare notes name": '// record: docs/bench/x-notes.md "tiny re-fit"; x-notes.md "tiny re-fit"\n' + row,
            "no citation": "// sm_90: measured on the H100.\n" + row,
            "no block": row,
            "record without file": '// record: the H100 run "tiny"\n' + row,
            "second key missing": '// record: bench/results/x.jsonl tables "E=8 topk=2 uniform" and\n// "E=9 topk=2 uniform"\n' + row,
            "later table of the other file": '// record: bench/results/x.jsonl table "E=8 topk=2 uniform";\n'
                                             '// docs/bench/x-notes.md "x", table "E=8 topk=2 uniform"\n' + row,
            "commit word": "// fitted on the H100 (record not kept)\n" + row,
        }
        for t in good:
            got = check_rows("p.hpp", t) + check_citations(root, "p.hpp", t)
            assert not got, (t, got)
        for what, t in wrong.items():
            got = check_rows("p.hpp", t) + check_citations(root, "p.hpp", t)
            assert got, f"accepted ({what}): {t!r}"
    with tempfile.TemporaryDirectory() as root:  # the declared counts in design headers
        os.makedirs(os.path.join(root, "kernels/x"))
        row = "// fitted on 0123abc (record not kept)\ninline constexpr Policy kPolicySm90 = {};\n"
        two = "// a took 1.2 us\n// b 1.1 -> 0.9\n"
        cases = {  # file -> text, whether it passes
            "d.cuh": [("// Comments here keep µs figures: 2 lines (why).\n" + two, True),
                      ("// Comments here keep µs figures: 1 line (why).\n" + two, False),
                      ("// Comments here keep µs figures: 3 lines (why).\n" + two, False),
                      (two, False)],
            "policy.hpp": [(row, True), ("// Comments here keep µs figures: 2 lines (why).\n" + two + row, False)],
        }
        for name, tries in cases.items():
            for text, ok in tries:
                for other in os.listdir(os.path.join(root, "kernels/x")):
                    os.remove(os.path.join(root, "kernels/x", other))
                with open(os.path.join(root, "kernels/x", name), "w") as f:
                    f.write(text)
                if name != "policy.hpp":
                    with open(os.path.join(root, "kernels/x/policy.hpp"), "w") as f:
                        f.write(row)
                got = check_tree(root)
                assert (not got) == ok, (name, text, got)
    for t in ["// 1.40 vs 1.41 us", "// 0.3-1.1 µs faster", "// 1.53 against 2.28", "// 3.80 -> 2.99",
              "// 2.82 / 2.47 against 3.31 / 2.97", "x = 1;  // 143 us"]:
        assert us_lines(t), t
    for t in ["// 256 threads beat 512 at 4096 slots", "// E = 16384: 2^14", "// 6.25 MB", "int us = 3;",
              '// record: docs/bench/x.md "a"', "// 0.5 of the SMs"]:
        assert not us_lines(t), t
    print("self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    self_test()
    bad = check_tree(sys.argv[1])
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} problem(s): policy rows must cite their records; kernels/ comments carry no µs figures")
        return 1
    print("policy rows cite their records; no µs figures in kernels/ comments outside the allowed design headers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
