#!/usr/bin/env python3
"""Corpus of malformed .npy files (plus a few valid controls), crafted byte by byte.

  npy_corpus.py --list                 print the case names, one per line
  npy_corpus.py --write DIR            write every file case as DIR/CASE.npy (fuzzing seeds)
  npy_corpus.py DIR CASE|all CMD...    write DIR/CASE.npy and run CMD... DIR/CASE.npy

A defect passes when CMD exits 2 and prints exactly one line on stderr that
names the file. A control (name starting with "ok_") passes when CMD exits 0.
Needs no numpy: the point is to describe every defect exactly.
"""
import os
import random
import struct
import subprocess
import sys

rnd = random.Random(1234)
I4_DATA = struct.pack("<6i", *[rnd.randint(-2**31, 2**31 - 1) for _ in range(6)])
OK = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"


def npy(header, data=I4_DATA, major=1, minor=0, pad=True):
    """A .npy file laid out the way NumPy does it (header padded to 64 bytes)."""
    h = header.encode("latin1") if isinstance(header, str) else header
    prefix = 10 if major == 1 else 12
    if pad:
        total = prefix + len(h) + 1
        h += b" " * (-total % 64) + b"\n"
    size = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, minor]) + size + h + data


def dict_with(descr="'<i4'", fortran="False", shape="(2, 3)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def with_header_len(n, major=1):
    """A valid file whose header-length field is replaced by n."""
    b = bytearray(npy(OK, major=major))
    b[8:10 if major == 1 else 12] = struct.pack("<H" if major == 1 else "<I", n)
    return bytes(b)


CASES = {
    # --- not a .npy file at all
    "empty_file": b"",
    "too_short": b"\x93NUM",
    "bad_magic": b"\x93NUMPZ" + npy(OK)[6:],
    "text_file": b"descr,shape\n<i4,2 3\n" * 4,
    "png_file": b"\x89PNG\r\n\x1a\n" + bytes(range(64)),
    # --- version and header length
    "version_4_0": b"\x93NUMPY\x04\x00" + npy(OK)[8:],
    "version_1_1": npy(OK, minor=1),
    "version_0_0": b"\x93NUMPY\x00\x00" + npy(OK)[8:],
    "header_len_past_eof": with_header_len(0x7FFF),
    "v2_header_len_past_eof": with_header_len(0xFFFFFFF0, major=2),
    "v2_file_ends_in_length": b"\x93NUMPY\x02\x00\x40\x00",
    "header_len_zero": with_header_len(0),
    # --- header is not a well-formed dict
    "header_is_list": npy("['descr', '<i4', 'shape', (2, 3)]"),
    "header_is_string": npy("'<i4'"),
    "header_unclosed_dict": npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), "),
    "header_garbage_after_dict": npy(OK + " trailing words"),
    "header_unterminated_string": npy("{'descr: '<i4', 'fortran_order': False, 'shape': (2, 3)}"),
    "header_non_ascii": npy(dict_with().encode() + b" \xff\xfe\xfd"),
    "header_nul_byte": npy(b"{'descr': '<i4',\x00 'fortran_order': False, 'shape': (2, 3)}"),
    "header_v3_utf8_descr": npy("{'descr': '<i4\u00e9', 'fortran_order': False, 'shape': (2, 3)}".encode("utf8"),
                                major=3),
    "header_python_call": npy("{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': (2, 3)}"),
    # --- keys
    "missing_descr": npy("{'fortran_order': False, 'shape': (2, 3), }"),
    "missing_shape": npy("{'descr': '<i4', 'fortran_order': False, }"),
    "missing_fortran_order": npy("{'descr': '<i4', 'shape': (2, 3), }"),
    "extra_key": npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'units': 'm', }"),
    "duplicate_key": npy("{'descr': '<i4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
    "empty_dict": npy("{}"),
    # --- descr
    "descr_garbage": npy(dict_with(descr="'hello'")),
    "descr_complex64": npy(dict_with(descr="'<c8'"), data=b"\0" * 48),
    "descr_float128": npy(dict_with(descr="'<f16'"), data=b"\0" * 96),
    "descr_object_pickle": npy(dict_with(descr="'|O'"), data=b"\x80\x04N."),
    "descr_unicode": npy(dict_with(descr="'<U1'")),
    "descr_datetime": npy(dict_with(descr="'<M8[ns]'"), data=b"\0" * 48),
    "descr_void4": npy(dict_with(descr="'|V4'")),
    "descr_structured": npy(dict_with(descr="[('x', '<i4')]")),
    "descr_not_string": npy(dict_with(descr="4")),
    # --- fortran_order
    "fortran_order_int": npy(dict_with(fortran="0")),
    "fortran_order_lowercase": npy(dict_with(fortran="false")),
    # --- shape
    "shape_is_list": npy(dict_with(shape="[2, 3]")),
    "shape_paren_int": npy(dict_with(shape="(6)")),
    "shape_is_string": npy(dict_with(shape="'2, 3'")),
    "shape_negative_dim": npy(dict_with(shape="(-2, -3)")),
    "shape_float_dim": npy(dict_with(shape="(2.5, 3)")),
    "shape_dim_too_big_for_int64": npy(dict_with(shape="(99999999999999999999,)")),
    "numel_overflows_int64": npy(dict_with(shape="(4294967296, 4294967296)")),
    "numel_overflow_beside_zero": npy(dict_with(shape="(0, 4294967296, 4294967296)"), data=b""),
    "bytes_overflow_int64": npy(dict_with(descr="'<f8'", shape="(2305843009213693952,)")),
    # --- data size
    "truncated_data": npy(OK, data=I4_DATA[:-1]),
    "truncated_huge_shape": npy(dict_with(descr="'<f8'", shape="(1000000000000,)")),
    "no_data_at_all": npy(OK, data=b""),
    "trailing_data": npy(OK, data=I4_DATA + b"\0\0\0\0"),
    "trailing_npy_appended": npy(OK) + npy(OK),
    # --- valid controls: the same tool must accept these
    "ok_v1": npy(OK),
    "ok_v2": npy(OK, major=2),
    "ok_v3": npy(OK, major=3),
    "ok_big_endian": npy(dict_with(descr="'>i4'")),
    "ok_fortran": npy(dict_with(fortran="True")),
    "ok_bf16_v2": npy(dict_with(descr="'<V2'"), data=I4_DATA[:12]),
    "ok_scalar": npy(dict_with(descr="'<f8'", shape="()"), data=struct.pack("<d", 2.5)),
    "ok_empty_dims": npy(dict_with(shape="(0, 3)"), data=b""),
}
SPECIAL = ["path_is_directory", "path_missing"]


def names():
    return list(CASES) + SPECIAL


def materialize(root, name):
    path = os.path.join(root, name + ".npy")
    if name == "path_is_directory":
        os.makedirs(path, exist_ok=True)
    elif name == "path_missing":
        if os.path.exists(path):
            os.remove(path)
    else:
        with open(path, "wb") as f:
            f.write(CASES[name])
    return path


def check(root, name, cmd):
    path = materialize(root, name)
    r = subprocess.run(cmd + [path], capture_output=True)
    err = r.stderr.decode("utf8", "replace")
    lines = [l for l in err.splitlines() if l.strip()]
    if name.startswith("ok_"):
        if r.returncode != 0:
            return f"valid file rejected: exit {r.returncode}, stderr {err.strip()!r}"
        return None
    if r.returncode != 2:
        return f"exit {r.returncode}, want 2 (stderr {err.strip()!r})"
    if len(lines) != 1:
        return f"stderr has {len(lines)} lines, want 1: {err!r}"
    if path not in lines[0] and os.path.basename(path) not in lines[0]:
        return f"message does not name the file: {lines[0]!r}"
    return None


def main(argv):
    if argv[1:] == ["--list"]:
        print("\n".join(names()))
        return 0
    if len(argv) == 3 and argv[1] == "--write":
        os.makedirs(argv[2], exist_ok=True)
        for name in CASES:
            materialize(argv[2], name)
        return 0
    if len(argv) < 4:
        print(__doc__)
        return 2
    root, which, cmd = argv[1], argv[2], argv[3:]
    os.makedirs(root, exist_ok=True)
    todo = names() if which == "all" else [which]
    bad = 0
    for name in todo:
        if name not in CASES and name not in SPECIAL:
            print(f"unknown case {name}")
            return 2
        problem = check(root, name, cmd)
        print(f"{'FAIL' if problem else 'ok  '} {name}" + (f": {problem}" if problem else ""))
        bad += problem is not None
    defects = sum(1 for n in todo if not n.startswith("ok_"))
    print(f"{len(todo) - bad}/{len(todo)} cases behaved ({defects} defects, {len(todo) - defects} valid controls)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
