#!/usr/bin/env python3
"""Shared pieces of the CLI tests: the case registry, running moekit, an
independent .npy reader and writer. cli_test.py runs the cases; each family's
cases live in tests/<family>/cli_cases.py and import this module.

Stdlib only: .npy files are read by a small independent parser below, so these
tests do not trust moekit's own reader.
"""
import ast
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile

MOEKIT, DATA = sys.argv[1], sys.argv[2]
CASES = {}
SKIP = 77


def case(suite="cpu"):
    def deco(f):
        CASES[f.__name__] = (suite, f)
        return f
    return deco


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def run(*args, code=None):
    p = subprocess.run([MOEKIT, *map(str, args)], capture_output=True, text=True, timeout=600)
    if code is not None and p.returncode != code:
        raise Fail(f"moekit {' '.join(map(str, args))}: exit {p.returncode}, wanted {code}\n"
                   f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def load_npy(path):
    """Minimal independent .npy reader (v1-3, little-endian numeric, C order)."""
    with open(path, "rb") as f:
        b = f.read()
    expect(b[:6] == b"\x93NUMPY", f"{path}: bad magic")
    major = b[6]
    if major == 1:
        hl, off = struct.unpack("<H", b[8:10])[0], 10
    else:
        hl, off = struct.unpack("<I", b[8:12])[0], 12
    hdr = ast.literal_eval(b[off:off + hl].decode("latin1"))
    data = b[off + hl:]
    expect((off + hl) % 64 == 0, f"{path}: data does not start at a multiple of 64")
    code = {"<i4": "i", "<i8": "q", "<f4": "f", "<f8": "d", "<u2": "H", "<f2": "e", "<V2": "H", "|V2": "H"}
    fmtc = code[hdr["descr"]]
    n = 1
    for s in hdr["shape"]:
        n *= s
    size = struct.calcsize(fmtc)
    expect(len(data) == n * size, f"{path}: {len(data)} data bytes for {n} elements")
    return hdr, list(struct.unpack(f"<{n}{fmtc}", data)) if n else []


def save_npy(path, descr, shape, values, version=1):
    fmtc = {"<i4": "i", "<i8": "q", "<f4": "f", "<f2": "e", "<u2": "H", "<i2": "h", "<f8": "d"}[descr]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pre = 10
    pad = 64 - (pre + len(hdr) + 1) % 64
    hdr = hdr + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack(f"<{len(values)}{fmtc}", *values))


def tmp():
    return tempfile.mkdtemp(prefix="moekit-cli-")


def has_gpu():
    p = run("info", "--format", "json", code=0)
    return json.loads(p.stdout.splitlines()[0]).get("device") is not None


def limited_run(*args, mem_gb=2):
    """run() with the address space capped: a size check that regressed fails as
    'out of host memory' instead of eating the machine."""

    def cap():
        lim = mem_gb << 30
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    return subprocess.run([MOEKIT, *map(str, args)], capture_output=True, text=True, timeout=120,
                          preexec_fn=cap)
