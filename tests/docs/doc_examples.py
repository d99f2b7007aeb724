#!/usr/bin/env python3
"""Runs every shell example of README.md and docs/*.md with the real binary.

    doc_examples.py MOEKIT ROOT [DOC...]     (DOC: a path relative to ROOT; default: all)

The rule (docs/architecture.md, "Doc examples are tested"; docs/bench/, records of GPU
measurements at full size, is not run):

- A fenced block whose info string starts with `sh` (or bash, shell) holds
  commands: every line is one, a line ending in `\\` goes on on the next,
  blank lines and `#` lines are skipped. In a `console` block the commands
  are the lines starting with `$ `; the other lines are output (not compared).
- Every command must start with `moekit` (run as MOEKIT, through a PATH entry
  of its own; pipes and `;` are the shell's). Anything else in such a block,
  `make`, `ncu`, a test binary, fails this test unless the block is marked
  `no-run` after the language (```sh no-run): shown, never run here.
- A fenced block without a language that holds a line starting with
  `moekit ` fails this test: say whether it runs (sh) or not (sh no-run, or
  text for a synopsis).
- Each document's commands run in order, in a fresh scratch folder of its own
  holding a copy of data/: a document makes its own inputs before using them.
- Expected exit code: 0. A command with `--device gpu` on a machine without a
  CUDA device: 3 (the documented code). `moekit compare`: 0 or 1 (its verdict
  is on timings, which never decide a test). `moekit sass` where cuobjdump is
  not on PATH: 2 (the documented error naming the missing tool).

A failure names the document, the line and the command, with the exit code and
the end of its stderr. Stdlib only.
"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUN_LANGS = {"sh", "bash", "shell", "console"}
TIMEOUT = 120  # seconds per command; the examples are small
SLOW = 5  # seconds: a command taking longer is named in the output


class Command:
    def __init__(self, doc, line, text):
        self.doc, self.line, self.text = doc, line, text

    def where(self):
        return f"{self.doc}:{self.line}"


def extract(doc, text):
    """(commands, problems) of one Markdown document."""
    commands, problems = [], []
    fence = None  # (marker, info words, start line) while inside a block
    pending = None  # a command continued with a trailing backslash
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        stripped = line.lstrip()
        if fence is None:
            m = re.match(r"(`{3,}|~{3,})(.*)$", stripped)
            if m:
                fence = (m.group(1), m.group(2).split(), n)
            continue
        marker, info, start = fence
        if stripped.startswith(marker) and stripped.strip(marker[0]) == "":
            if pending is not None:
                problems.append(f"{doc}:{pending.line}: the command ends in a backslash at the end of its block")
                pending = None
            fence = None
            continue
        lang = info[0] if info else ""
        marks = info[1:]
        if lang == "":
            if stripped.startswith("moekit "):
                problems.append(f"{doc}:{n}: a moekit command in a fenced block without a language: tag the block "
                                f"at line {start} sh (run by this test), sh no-run or text")
            continue
        if lang not in RUN_LANGS or "no-run" in marks:
            continue
        if pending is not None:
            pending.text += " " + stripped
        else:
            if lang == "console":
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:].lstrip()
            if stripped == "" or stripped.startswith("#"):
                continue
            pending = Command(doc, n, stripped)
        if pending.text.endswith("\\"):
            pending.text = pending.text[:-1].rstrip()
            continue
        cmd, pending = pending, None
        if not re.match(r"moekit(\s|$)", cmd.text):
            problems.append(f"{cmd.where()}: `{cmd.text}` is not a moekit command: only moekit commands run here; "
                            f"mark the block at line {start} `{lang} no-run` if it is not meant to run")
            continue
        commands.append(cmd)
    if fence is not None:
        problems.append(f"{doc}:{fence[2]}: the fenced block is never closed")
    return commands, problems


def has_gpu(moekit):
    """Whether `moekit info` finds a CUDA device (as the CLI tests ask)."""
    p = subprocess.run([moekit, "info", "--format", "json"], capture_output=True, text=True, timeout=TIMEOUT)
    try:
        return p.returncode == 0 and json.loads(p.stdout.splitlines()[0]).get("device") is not None
    except (ValueError, IndexError, AttributeError):
        return False


def expected_codes(cmd, gpu):
    words = cmd.text.split()
    if len(words) > 1 and words[1] == "compare":
        return {0, 1}
    if re.search(r"--device(\s+|=)gpu\b", cmd.text) and not gpu:
        return {3}
    if len(words) > 1 and words[1] == "sass" and shutil.which("cuobjdump") is None:
        return {2}  # the documented one-line error naming the missing tool
    return {0}


def run_doc(moekit, root, doc, gpu):
    """Failure lines for one document (empty: every example ran)."""
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        commands, problems = extract(doc, f.read())
    failures, slow = list(problems), []
    with tempfile.TemporaryDirectory(prefix="moekit-doc-") as scratch:
        shutil.copytree(os.path.join(root, "data"), os.path.join(scratch, "data"))
        bin_dir = os.path.join(scratch, ".bin")
        os.mkdir(bin_dir)
        os.symlink(os.path.abspath(moekit), os.path.join(bin_dir, "moekit"))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        for cmd in commands:
            want = expected_codes(cmd, gpu)
            t0 = time.monotonic()
            try:
                p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd.text], cwd=scratch, env=env,
                                   capture_output=True, text=True, timeout=TIMEOUT)
                code, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired as e:
                code, err = "timeout", f"no exit after {TIMEOUT} s (keep doc examples small)"
            if time.monotonic() - t0 > SLOW:
                slow.append(f"{cmd.where()}: {time.monotonic() - t0:.0f} s")
            if code not in want:
                tail = "\n    ".join(err.strip().splitlines()[-4:])
                failures.append(f"{cmd.where()}: `{cmd.text}`: exit {code}, expected "
                                f"{' or '.join(map(str, sorted(want)))}\n    {tail}")
    return doc, len(commands), failures, slow


def documents(root):
    docs = ["README.md"]
    docs += sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return docs


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    moekit, root = sys.argv[1], sys.argv[2]
    docs = sys.argv[3:] or documents(root)
    gpu = has_gpu(moekit)
    print(f"doc examples: {len(docs)} documents, {'with' if gpu else 'without'} a CUDA device")
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for doc, n, failures, slow in pool.map(lambda d: run_doc(moekit, root, d, gpu), docs):
            print(f"{doc}: {n} commands, {'ok' if not failures else f'{len(failures)} failed'}"
                  + (f" (slow: {', '.join(slow)})" if slow else ""))
            for f in failures:
                print("  " + f)
            failed += bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
