#!/usr/bin/env python3
"""Build-time resource records of every kernel in the given static libraries.

Reads each host object's embedded fatbin (the `.nv_fatbin` section), and in
every cubin of it each entry function's
  registers per thread   EIATTR_REGCOUNT of the kernel (the `.text.<kernel>`
                         section's sh_info >> 24 says the same where set)
  stack frame (bytes)    EIATTR_FRAME_SIZE of the kernel (what ptxas prints as
                         "N bytes stack frame": local memory, spills included)
  static shared memory   the `.nv.shared.<kernel>` section's size, less the
                         block's reserved shared memory where the cubin puts
                         that at the start of the kernel's window (sm_90:
                         `.nv.shared.reserved.0`)
  launch bound           EIATTR_MAX_THREADS (`__launch_bounds__`), 0 if none
and writes them as C++ initializers (src/kernel_resources.cpp includes them),
one per (architecture, kernel), so the binary carries what the compiler made
of its own kernels. Pure Python: the toolkit on the build machines has no
cuobjdump; large cubins are zstd frames (the zstd tool).
tests/resources/records_test.py checks these numbers against
ptxas's own --resource-usage report.

  resource_records.py OUT.inc LIB.a|OBJ.o...
"""
import os
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
FATBIN_CUBIN = 2
# Entry flags of a compressed payload: 0x8000 zstd (nvcc's default for large
# cubins, decompressed with the zstd tool), 0x2000 the older LZ format.
FATBIN_ZSTD = 0x8000
FATBIN_LZ = 0x2000
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SHT_SYMTAB = 2
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10
EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
# The block's reserved shared memory (cudaDevAttrReservedSharedMemoryPerBlock)
# that sm_90 cubins lay out at the start of each kernel's shared window.
RESERVED_SMEM_SECTION = ".nv.shared.reserved."


class RecordError(Exception):
    pass


def archive_members(path):
    """(name, bytes) of each object of an ar archive (thin or regular)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"!<thin>\n"):
        thin = True
    elif data.startswith(b"!<arch>\n"):
        thin = False
    else:
        yield os.path.basename(path), data  # a plain object
        return
    p, longnames = 8, b""
    while p + 60 <= len(data):
        head = data[p:p + 60]
        name = head[:16].decode().strip()
        size = int(head[48:58].decode().strip())
        p += 60
        if name in ("/", "/SYM64/", "//"):
            if name == "//":
                longnames = data[p:p + size]
            p += size + (size & 1)
            continue
        if name.startswith("/"):
            off = int(re.match(r"/(\d+)", name).group(1))
            name = longnames[off:longnames.index(b"\n", off)].decode()
        name = name.rstrip("/")
        if thin:  # members are paths relative to the archive
            with open(os.path.join(os.path.dirname(path), name), "rb") as f:
                yield name, f.read()
        else:
            yield name, data[p:p + size]
            p += size + (size & 1)


def elf_sections(elf):
    """[(name, type, flags, addr, offset, size, link, info, addralign, entsize)]"""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise RecordError("not a 64-bit ELF object")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = raw[shstrndx][4]

    def cstr(o):
        return elf[o:elf.index(b"\0", o)].decode()

    return [(cstr(names + s[0]),) + s[1:] for s in raw]


def unzstd(data, size, sm):
    """A zstd-compressed cubin of `size` bytes, through the zstd tool."""
    if not data.startswith(ZSTD_MAGIC):
        raise RecordError(f"sm_{sm} cubin: compressed, but not a zstd frame")
    try:
        out = subprocess.run(["zstd", "-dcq"], input=data, capture_output=True, check=True).stdout
    except FileNotFoundError:
        raise RecordError("the zstd tool is not on PATH (it decompresses large cubins)") from None
    except subprocess.CalledProcessError as e:
        raise RecordError(f"sm_{sm} cubin: zstd failed: {e.stderr.decode().strip()}") from None
    if len(out) != size:
        raise RecordError(f"sm_{sm} cubin: {len(out)} bytes decompressed, the fatbin says {size}")
    return out


def fatbin_cubins(blob):
    """(sm, cubin bytes) of every cubin entry of the fatbins in blob."""
    base = 0
    while base + 16 <= len(blob):
        magic, _version, head, size = struct.unpack_from("<IHHQ", blob, base)
        if magic != FATBIN_MAGIC:
            raise RecordError(f"no fatbin header at offset {base}")
        off, end = base + head, base + head + size
        while off < end:
            kind, _v, ehead, payload = struct.unpack_from("<HHIQ", blob, off)
            sm = struct.unpack_from("<I", blob, off + 28)[0]
            flags = struct.unpack_from("<Q", blob, off + 40)[0]
            if kind == FATBIN_CUBIN:
                cubin = blob[off + ehead:off + ehead + payload]
                if flags & FATBIN_ZSTD:  # the frame is padded: its own size at +16
                    cubin = unzstd(cubin[:struct.unpack_from("<I", blob, off + 16)[0]], struct.unpack_from("<Q", blob, off + 56)[0], sm)
                elif flags & FATBIN_LZ:
                    raise RecordError(f"sm_{sm} cubin compressed in the old LZ format (CUDA < 12.4?)")
                yield sm, cubin
            off += ehead + payload
        base = end
        base += (-base) % 8


def nv_info(blob):
    """(attribute, value bytes or int) items of a .nv.info section."""
    p = 0
    while p + 2 <= len(blob):
        fmt, attr = blob[p], blob[p + 1]
        if fmt == EIFMT_SVAL:
            n = struct.unpack_from("<H", blob, p + 2)[0]
            yield attr, blob[p + 4:p + 4 + n]
            p += 4 + n
        elif fmt == EIFMT_HVAL:
            yield attr, struct.unpack_from("<H", blob, p + 2)[0]
            p += 4
        elif fmt == EIFMT_BVAL:
            yield attr, blob[p + 2]
            p += 4
        elif fmt == EIFMT_NVAL:  # a flag: its 2 value bytes are padding
            yield attr, None
            p += 4
        else:
            raise RecordError(f"unknown .nv.info item format {fmt}")


def cubin_kernels(cubin):
    """{mangled name: (regs, frame bytes, static smem, launch bound)}"""
    secs = elf_sections(cubin)
    by_name = {s[0]: s for s in secs}
    symtab = next((s for s in secs if s[1] == SHT_SYMTAB), None)
    if symtab is None:
        return {}
    strtab = secs[symtab[6]]
    syms = []
    for i in range(symtab[5] // 24):
        n, info, other, shndx, _val, _size = struct.unpack_from("<IBBHQQ", cubin, symtab[4] + i * 24)
        o = strtab[4] + n
        syms.append((cubin[o:cubin.index(b"\0", o)].decode(), info, other))
    frame, regcount = {}, {}
    if ".nv.info" in by_name:
        s = by_name[".nv.info"]
        for attr, v in nv_info(cubin[s[4]:s[4] + s[5]]):
            if attr in (EIATTR_FRAME_SIZE, EIATTR_REGCOUNT) and isinstance(v, bytes) and len(v) == 8:
                sym, value = struct.unpack("<II", v)
                (frame if attr == EIATTR_FRAME_SIZE else regcount)[syms[sym][0]] = value
    reserved_in_window = any(s[0].startswith(RESERVED_SMEM_SECTION) for s in secs)
    out = {}
    for name, info, other in syms:
        if info & 0xF != STT_FUNC or not other & STO_CUDA_ENTRY:
            continue
        text = by_name.get(".text." + name)
        if text is None:
            raise RecordError(f"kernel {name} has no .text section")
        regs = regcount.get(name, text[7] >> 24)
        if regs != text[7] >> 24 and text[7] >> 24 != 0:
            raise RecordError(f"kernel {name}: EIATTR_REGCOUNT {regs}, .text says {text[7] >> 24}")
        shared = by_name.get(".nv.shared." + name)
        smem = shared[5] if shared else 0
        if shared and reserved_in_window:
            smem = max(0, smem - 1024)
        bound = 0
        info_sec = by_name.get(".nv.info." + name)
        if info_sec:
            for attr, v in nv_info(cubin[info_sec[4]:info_sec[4] + info_sec[5]]):
                if attr == EIATTR_MAX_THREADS and isinstance(v, bytes) and len(v) == 12:
                    x, y, z = struct.unpack("<III", v)
                    bound = x * y * z
        out[name] = (regs, frame.get(name, 0), smem, bound)
    return out


def object_records(obj):
    """{(sm, mangled): (regs, frame, smem, bound)} of one host object."""
    if obj[:4] != b"\x7fELF":
        return {}
    fat = next((s for s in elf_sections(obj) if s[0] == ".nv_fatbin"), None)
    if fat is None:
        return {}
    recs = {}
    for sm, cubin in fatbin_cubins(obj[fat[4]:fat[4] + fat[5]]):
        for name, r in cubin_kernels(cubin).items():
            recs[(sm, name)] = r
    return recs


def records(paths):
    """{(sm, mangled): (regs, frame, smem, bound)} of every object in paths."""
    recs = {}
    for path in paths:
        for member, data in archive_members(path):
            try:
                recs.update(object_records(data))
            except RecordError as e:
                raise RecordError(f"{path}({member}): {e}") from None
    return recs


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        recs = records(argv[2:])
    except (RecordError, OSError, ValueError, struct.error) as e:
        print(f"resource_records.py: {e}", file=sys.stderr)
        return 1
    lines = [f"// Generated by kernels/resource_records.py from {len(argv) - 2} libraries: do not edit.",
             "// {sm, mangled name, registers, stack frame bytes, static shared bytes, launch bound}"]
    for (sm, name), (regs, frame, smem, bound) in sorted(recs.items()):
        lines.append(f'{{{sm}, "{name}", {regs}, {frame}, {smem}, {bound}}},')
    tmp = argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
