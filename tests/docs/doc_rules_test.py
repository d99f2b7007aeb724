#!/usr/bin/env python3
"""The doc-example checker rejects what it should (doc_examples.py's rule, hand-written cases).

    doc_rules_test.py MOEKIT
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_examples  # noqa: E402

MOEKIT = sys.argv[1]
failed = []


def check(cond, what):
    if not cond:
        failed.append(what)


def extract(text):
    cmds, problems = doc_examples.extract("d.md", text)
    return [(c.line, c.text) for c in cmds], problems


# Which lines are commands, with continuations and comments.
cmds, problems = extract("""text
```sh
# a comment
moekit gen expert-map --global-experts 8 --ranks 2 -o m.npy

moekit info m.npy \\
    --format json   # continued
```
```console
$ moekit info
output line, not run
moekit not a command here either
```
```sh no-run
make demo
moekit never-run
```
```text
moekit info FILE...
```
```python
x = 1
```
""")
check(cmds == [(4, "moekit gen expert-map --global-experts 8 --ranks 2 -o m.npy"),
               (6, "moekit info m.npy --format json   # continued"), (10, "moekit info")], f"commands {cmds}")
check(problems == [], f"problems {problems}")

# An untagged block with a moekit line, a non-moekit command, an open block.
_, problems = extract("```\nmoekit info x.npy\n```\n")
check(len(problems) == 1 and "d.md:2:" in problems[0] and "without a language" in problems[0], f"{problems}")
_, problems = extract("```sh\nncu moekit info\n```\n")
check(len(problems) == 1 and "d.md:2:" in problems[0] and "no-run" in problems[0], f"{problems}")
_, problems = extract("```sh\nmoekit info \\\n```\n")
check(len(problems) == 1 and "backslash" in problems[0], f"{problems}")
_, problems = extract("```sh\nmoekit info\n")
check(len(problems) == 1 and "never closed" in problems[0], f"{problems}")

# Expected exit codes.
C = doc_examples.Command
check(doc_examples.expected_codes(C("d", 1, "moekit compare a b"), False) == {0, 1}, "compare")
check(doc_examples.expected_codes(C("d", 1, "moekit OP --device gpu -E 8"), False) == {3}, "--device gpu")
check(doc_examples.expected_codes(C("d", 1, "moekit OP --device=gpu -E 8"), True) == {0}, "--device gpu, GPU")
check(doc_examples.expected_codes(C("d", 1, "moekit OP --device cpu"), False) == {0}, "cpu")

# A document run: a file used before it is made fails, naming doc, line, command; so does
# moekit failing inside a pipe (pipefail).
with tempfile.TemporaryDirectory() as root:
    os.mkdir(os.path.join(root, "data"))
    with open(os.path.join(root, "doc.md"), "w") as f:
        f.write("```sh\nmoekit info m.npy\n"
                "moekit gen expert-map --global-experts 8 --ranks 2 -o m.npy\n"
                "moekit info m.npy\nmoekit info m.npy | head -1\nmoekit info nothing.npy | cat\n```\n")
    doc, n, failures, _ = doc_examples.run_doc(MOEKIT, root, "doc.md", doc_examples.has_gpu(MOEKIT))
    check(n == 5, f"{n} commands")
    check(len(failures) == 2 and failures[0].startswith("doc.md:2: `moekit info m.npy`: exit 2")
          and failures[1].startswith("doc.md:6: `moekit info nothing.npy | cat`: exit 2"), f"{failures}")

if failed:
    print("\n".join(failed))
    sys.exit(1)
print("doc example rules: ok")
