#!/usr/bin/env python3
"""NumPy interop for src/npy, through npy_tool.

Writes arrays with real NumPy (every dtype, ranks 0-4, empty dimensions,
big-endian, Fortran order, format versions 1.0/2.0/3.0, bfloat16 as NumPy and
ml_dtypes save it), then for each file checks that
  * `npy_tool describe FILE` prints NumPy's dtype and shape, and
  * `npy_tool copy FILE OUT` writes a file NumPy loads back identical (same
    values bit for bit, native byte order, C order), as format 1.0 with the
    data at a multiple of 64 bytes.

usage: numpy_interop.py NPY_TOOL WORKDIR
Exit: 0 all good, 1 a check failed, 77 (meson: skipped) when numpy is missing.
"""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print(f"numpy is not importable by {sys.executable}: skipping (install python3-numpy)")
    sys.exit(77)

try:  # optional: the real bfloat16 dtype, when installed
    import ml_dtypes
except ImportError:
    ml_dtypes = None

NAMES = {
    "b": "bool", "i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32",
    "u4": "uint32", "i8": "int64", "u8": "uint64", "f2": "float16", "f4": "float32", "f8": "float64",
}
DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"]
SHAPES = [(), (7,), (0,), (3, 5), (4, 0), (2, 3, 4), (2, 0, 3), (2, 3, 1, 5), (0, 0, 0, 0), (1, 1, 1, 1), (37, 129)]

rng = np.random.default_rng(20240601)
failures = []
checked = 0


def name_of(dt):
    dt = np.dtype(dt)
    return "bool" if dt.kind == "b" else NAMES[f"{dt.kind}{dt.itemsize}"]


def random_array(dt, shape):
    dt = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "b":
        a = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    else:
        a = (rng.standard_normal(n) * 100).astype(dt)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dt)
        if n >= 8:
            a[rng.choice(n, 4, replace=False)] = specials
    return a.reshape(shape)


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def fail(case, what):
    failures.append(f"{case}: {what}")


def check_written_layout(case, path, want_descr):
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        header = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                  else np.lib.format.read_array_header_2_0(f))
        offset = f.tell()
    if version != (1, 0):
        fail(case, f"written as format {version}, want (1, 0)")
    if offset % 64:
        fail(case, f"data starts at {offset}, not a multiple of 64")
    raw = open(path, "rb").read(offset)
    if not raw.endswith(b"\n"):
        fail(case, "header does not end with a newline")
    if f"'descr': '{want_descr}'".encode() not in raw:
        fail(case, f"header {raw[10:]!r} lacks descr {want_descr}")
    if header is not None and header[1]:
        fail(case, "written in Fortran order")


def roundtrip(case, path, original, expect_name, extra=(), want_bytes=None, want_descr=None):
    """describe + copy PATH; compare with `original` (what NumPy holds)."""
    global checked
    checked += 1
    shape = original.shape
    r = run([TOOL, "describe", *extra, path])
    want = f"{expect_name} {shape}"
    if r.returncode != 0 or r.stdout.strip() != want:
        fail(case, f"describe gave rc={r.returncode} out={r.stdout.strip()!r} err={r.stderr.strip()!r}, want {want!r}")
        return
    out = os.path.join(WORK, "out_" + os.path.basename(path))
    r = run([TOOL, "copy", *extra, path, out])
    if r.returncode != 0:
        fail(case, f"copy failed rc={r.returncode}: {r.stderr.strip()}")
        return
    back = np.load(out)
    if back.shape != shape:
        fail(case, f"shape {back.shape} != {shape}")
        return
    if want_bytes is None:
        native = original.dtype.newbyteorder("=")
        if back.dtype != native:
            fail(case, f"dtype {back.dtype.str} != {native.str}")
            return
        want_bytes = np.ascontiguousarray(original.astype(native)).tobytes()
    if back.tobytes() != want_bytes:
        fail(case, "data differs from what NumPy wrote")
        return
    if want_descr is None:
        want_descr = back.dtype.str
    check_written_layout(case, out, want_descr)
    os.remove(out)


fortran_files = 0


def count_fortran(path):
    """Counts files NumPy really wrote in Fortran order (not degenerate shapes)."""
    global fortran_files
    with open(path, "rb") as f:
        if b"'fortran_order': True" in f.read(4096):
            fortran_files += 1


def save(name, arr, version=None):
    path = os.path.join(WORK, name + ".npy")
    if version is None:
        np.save(path, arr)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, version=version)
    return path


def save_with_header(name, descr, shape, data):
    """A file whose header says `descr` (what ml_dtypes' np.save produces)."""
    path = os.path.join(WORK, name + ".npy")
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
        f.write(data)
    return path


def main():
    for dt in DTYPES:
        for si, shape in enumerate(SHAPES):
            a = random_array(dt, shape)
            tag = f"{np.dtype(dt).str[1:]}_r{len(shape)}_{si}"
            roundtrip(f"{tag} little-endian", save(tag + "_le", a), a, name_of(dt))
            if np.dtype(dt).itemsize > 1:
                be = a.astype(np.dtype(dt).newbyteorder(">"))
                roundtrip(f"{tag} big-endian", save(tag + "_be", be), be, name_of(dt))
            if len(shape) >= 2:
                fa = np.asfortranarray(a)
                p = save(tag + "_f", fa)
                count_fortran(p)
                roundtrip(f"{tag} fortran", p, fa, name_of(dt))
                fbe = np.asfortranarray(a.astype(np.dtype(dt).newbyteorder(">")))
                roundtrip(f"{tag} fortran big-endian", save(tag + "_fbe", fbe), fbe, name_of(dt))
        for version in [(1, 0), (2, 0), (3, 0)]:
            a = random_array(dt, (3, 4, 5))
            tag = f"{np.dtype(dt).str[1:]}_v{version[0]}"
            roundtrip(f"{tag} format {version}", save(tag, a, version), a, name_of(dt))
            fa = np.asfortranarray(a)
            p = save(tag + "_f", fa, version)
            count_fortran(p)
            roundtrip(f"{tag} format {version} fortran", p, fa, name_of(dt))

    # bfloat16. NumPy saves an ml_dtypes.bfloat16 array with descr '<V2'; a plain
    # 2-byte void array saves as '|V2'. Both read as bfloat16; we write '<V2'.
    bits = rng.integers(0, 2**16, (5, 6), dtype=np.uint16)
    void = bits.view("V2")
    roundtrip("bf16 |V2 from numpy", save("bf16_void", void), void, "bfloat16",
              want_bytes=bits.tobytes(), want_descr="<V2")
    p = save_with_header("bf16_mldtypes_header", "<V2", bits.shape, bits.tobytes())
    roundtrip("bf16 <V2 (ml_dtypes header)", p, void, "bfloat16", want_bytes=bits.tobytes(), want_descr="<V2")
    fv = np.asfortranarray(void)
    roundtrip("bf16 |V2 fortran", save("bf16_void_f", fv), fv, "bfloat16", want_bytes=bits.tobytes(), want_descr="<V2")
    # torch users: t.view(torch.int16).numpy() -> '<i2', read with --dtype bf16.
    i16 = bits.view(np.int16)
    roundtrip("bf16 via int16 + --dtype bf16", save("bf16_i16", i16), i16, "bfloat16", ["--dtype", "bf16"],
              want_bytes=bits.tobytes(), want_descr="<V2")
    be16 = i16.astype(">i2")
    roundtrip("bf16 via >i2 + --dtype bf16", save("bf16_i16_be", be16), be16, "bfloat16", ["--dtype", "bf16"],
              want_bytes=bits.tobytes(), want_descr="<V2")
    # What we write loads in NumPy and views back to the bit patterns (the doc's recipe).
    out = os.path.join(WORK, "bf16_written.npy")
    r = run([TOOL, "copy", save("bf16_src", void), out])
    if r.returncode != 0 or not np.array_equal(np.load(out).view(np.uint16), bits):
        fail("bf16 recipe", f"np.load(f).view(np.uint16) differs (rc={r.returncode} {r.stderr.strip()})")
    if ml_dtypes is not None:
        x = (rng.standard_normal((4, 7)) * 10).astype(ml_dtypes.bfloat16)
        p = save("bf16_ml_dtypes", x)
        roundtrip("bf16 real ml_dtypes np.save", p, x.view("V2"), "bfloat16", want_bytes=x.tobytes(), want_descr="<V2")
        r = run([TOOL, "copy", p, out])
        if r.returncode != 0 or not np.array_equal(np.load(out).view(ml_dtypes.bfloat16), x):
            fail("ml_dtypes recipe", "np.load(f).view(ml_dtypes.bfloat16) differs")
    else:
        print("note: ml_dtypes not installed; bf16 checked with '<V2' headers written by NumPy's own header writer")

    # --dtype reinterpret must refuse a different element size.
    r = run([TOOL, "describe", "--dtype", "bf16", save("f4_small", random_array("f4", (3,)))])
    if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1:
        fail("reinterpret f4 as bf16", f"rc={r.returncode} err={r.stderr!r}, want a one-line error and rc 2")

    if fortran_files < 50:
        fail("coverage", f"only {fortran_files} files were really written in Fortran order")
    print(f"numpy {np.__version__}: {checked} files checked ({fortran_files} in Fortran order), "
          f"{len(failures)} failures")
    for f in failures[:50]:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    TOOL = os.path.abspath(sys.argv[1])
    WORK = sys.argv[2]
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(main())
