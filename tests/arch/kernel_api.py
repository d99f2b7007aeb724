#!/usr/bin/env python3
"""Issue 30's kernel API that stands alone, as checks on the source tree:

  1. no file under kernels/ includes anything from src/: every quoted include
     of a kernels/ file resolves inside kernels/ (next to the file, or from
     kernels/ as the include root), never to a file of src/;
  2. a family uses another only through its public headers: no file under
     kernels/<g>/ names <f>::detail of another family f of families.txt;
  3. problem planning lives in kernels/: no header or source under src/
     declares or defines a make_problem;
  4. --then-align is composed once, by the family whose kernels/<f>/ holds
     then_align.hpp: no file outside that folder sets a Problem's
     align_block, align_rows or align_blocks by hand.

Before checking the tree, each check is run on a crafted tree that breaks it
and must report it (a check that cannot fail is no check). The checks name no
family (tests/arch/family_footprint.py counts the files that do).

Usage: kernel_api.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
DECLARES_MAKE_PROBLEM = re.compile(r"^[A-Za-z_][\w:<>, \t*&]*\bmake_problem[ \t]*\(", re.M)
SETS_ALIGN_FIELDS = re.compile(r"\.\s*align_(?:block|rows|blocks)\s*=(?!=)")
SOURCE = (".hpp", ".cpp", ".cuh", ".cu", ".h", ".inc", ".in")


def files_under(root, top):
    out = []
    for d, dirs, names in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        out += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(SOURCE)]
    return sorted(out)


def read(root, f):
    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def includes_from_src(root):
    bad = []
    for f in files_under(root, "kernels"):
        for inc in INCLUDE.findall(read(root, f)):
            here = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            rooted = os.path.normpath(os.path.join("kernels", inc))
            inside = [p for p in (here, rooted) if p.startswith("kernels" + os.sep) and os.path.isfile(os.path.join(root, p))]
            if not inside or os.path.isfile(os.path.join(root, "src", inc)):
                bad.append(f"{f}: #include \"{inc}\"" + ("" if inside else " (not a kernels/ file)"))
    return bad


def families(root):
    with open(os.path.join(root, "families.txt")) as fh:
        return [l.strip() for l in fh if l.strip() and not l.startswith("#")]


def names_foreign_detail(root):
    bad = []
    fams = families(root)
    for g in fams:
        for f in files_under(root, os.path.join("kernels", g)):
            for n, line in enumerate(read(root, f).splitlines(), 1):
                for other in fams:
                    if other != g and re.search(r"\b" + re.escape(other) + r"::detail\b", line):
                        bad.append(f"{f}:{n}: {line.strip()}")
    return bad


def plans_in_src(root):
    bad = []
    for f in files_under(root, "src"):
        text = read(root, f)
        for m in DECLARES_MAKE_PROBLEM.finditer(text):
            bad.append(f"{f}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()}")
    return bad


def then_align_by_hand(root):
    homes = [d for d in sorted(os.listdir(os.path.join(root, "kernels")))
             if os.path.isfile(os.path.join(root, "kernels", d, "then_align.hpp"))]
    if len(homes) != 1:
        return [f"kernels/*/then_align.hpp: expected one, found {len(homes)}"]
    bad = []
    for top in ("src", "bench", "tests", "kernels"):
        for f in files_under(root, top):
            if f.startswith(os.path.join("kernels", homes[0]) + os.sep):
                continue
            for n, line in enumerate(read(root, f).splitlines(), 1):
                if SETS_ALIGN_FIELDS.search(line):
                    bad.append(f"{f}:{n}: {line.strip()}")
    return bad


CHECKS = [
    ("kernels/ includes nothing from src/", includes_from_src),
    ("a family's kernels name no other family's detail namespace", names_foreign_detail),
    ("no make_problem is declared or defined under src/", plans_in_src),
    ("--then-align is planned next to then_align.hpp only", then_align_by_hand),
]

# A tree that passes every check (families f1, f2, f3), and one file per check
# that breaks only it.
GOOD = {
    "families.txt": "f1\nf2\nf3\n",
    "kernels/f1/f1.hpp": '#include "common/device.hpp"\nnamespace moekit::f1::detail {}\nProblem make_problem(int n);\n',
    "kernels/common/device.hpp": "struct DeviceCaps {};\n",
    "kernels/f2/then_align.cpp": '#include "f2/then_align.hpp"\nvoid f(Problem& p) { p.align_block = 1; }\n',
    "kernels/f2/then_align.hpp": '#include "../f1/f1.hpp"\nusing f1::Args;\n',
    "kernels/f3/fused.cuh": '#include "f1/f1.hpp"\nusing f1::tiny_kernel; using detail::Place;\n',
    "src/errors.hpp": "struct InputError {};\n",
    "src/f1/reference.hpp": '#include "f1/f1.hpp"\nOutputs reference(const Problem& p);\n',
    "src/f2/family.cpp": "void g() { ap_ = planned([&] { return f2::plan_then_align(p_, b); }); "
                         "if (p.align_block == 0) {} }\n",
}
BREAKS = [
    {"kernels/f1/problem.cpp": '#include "errors.hpp"\n'},
    {"kernels/f3/registry.cu": "auto k = f1::detail::tiny_kernel<int, 256, false>;\n"},
    {"src/f1/reference.hpp": '#include "f1/f1.hpp"\nProblem make_problem(std::int64_t numel,\n'
                             "                     int e);\n"},
    {"bench/f2/bench_f2.cpp": "void h(Problem& p) { p.align_rows = ap.max_num_tokens_padded; }\n"},
]


def write_tree(root, files):
    for f, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, f)), exist_ok=True)
        with open(os.path.join(root, f), "w") as fh:
            fh.write(text)


def self_test():
    with tempfile.TemporaryDirectory() as good:
        write_tree(good, GOOD)
        for name, check in CHECKS:
            if check(good):
                return f"self-test: '{name}' rejects a tree that keeps it: {check(good)}"
    for (name, check), broken in zip(CHECKS, BREAKS):
        with tempfile.TemporaryDirectory() as tree:
            write_tree(tree, {**GOOD, **broken})
            if not check(tree):
                return f"self-test: '{name}' accepts a tree that breaks it ({', '.join(broken)})"
    return None


def main():
    why = self_test()
    if why:
        print(f"FAIL: {why}")
        return 1
    root = sys.argv[1]
    failed = False
    for name, check in CHECKS:
        bad = check(root)
        print(f"{'ok  ' if not bad else 'FAIL'} {name}")
        for b in bad:
            print(f"     {b}")
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
