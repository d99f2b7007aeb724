#!/usr/bin/env python3
"""Hostile-input suite: the real moekit binary against special files, broken
output folders, signals, weird file names and malformed .npy files.

  hostile.py --list                  print the case names, one per line
  hostile.py MOEKIT WORKDIR CASE     run one case in WORKDIR/CASE (exit 0 pass, 1 fail, 77 skip)

Every case states the exit code, the one stderr line (prefixed "moekit: ",
printable: no control byte reaches the terminal) and the state of the files
afterwards: an output folder holding a previous run's files must hold exactly
those bytes after a refused run, with no temp file left. Stdlib only.
"""
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "npy"))
import npy_corpus  # noqa: E402  (the malformed .npy files, byte by byte)

SKIP = 77
CASES = {}
MOEKIT = None


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def case(f):
    CASES[f.__name__] = f
    return f


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def run(*args, timeout=30, preexec_fn=None):
    """Runs moekit; returns (exit code, stdout bytes, stderr bytes). A hang is a failure."""
    try:
        p = subprocess.run([MOEKIT, *[a if isinstance(a, bytes) else str(a) for a in args]],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        raise Fail(f"moekit {args!r} still running after {timeout} s (hang)")
    return p.returncode, p.stdout, p.stderr


def expect_error(res, pattern, code=2):
    """Exit `code`, exactly one stderr line 'moekit: ...' matching `pattern` (a
    bytes regex searched in the line), and no control byte in it."""
    rc, out, err = res
    lines = [l for l in err.split(b"\n") if l.strip()]
    expect(rc == code, f"exit {rc}, want {code}; stderr {err!r}")
    expect(len(lines) == 1, f"stderr has {len(lines)} lines, want 1: {err!r}")
    line = lines[0]
    expect(line.startswith(b"moekit: "), f"stderr line lacks the 'moekit: ' prefix: {line!r}")
    expect(not re.search(rb"[\x00-\x1f\x7f]", line), f"control byte in the stderr line: {line!r}")
    expect(re.search(pattern, line), f"stderr line {line!r} does not match {pattern!r}")
    return line


def snapshot(d):
    """name -> (kind, bytes or link target, permission bits) of every entry of d."""
    out = {}
    for name in os.listdir(d):
        p = os.path.join(d, name)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                body = f.read()
        elif stat.S_ISLNK(st.st_mode):
            body = os.readlink(p)
        else:
            body = None
        out[os.fsdecode(name)] = (stat.S_IFMT(st.st_mode), body, stat.S_IMODE(st.st_mode))
    return out


def expect_unchanged(d, before, what="output folder"):
    after = snapshot(d)
    temps = [n for n in after if ".moekit-" in n or n.endswith(".tmp")]
    expect(not temps, f"temp files left in the {what}: {temps}")
    expect(after == before, f"{what} changed: before {sorted(before)}, after {sorted(after)}")


def npy_bytes(descr, shape, data, fortran=False, major=1):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    return npy_corpus.npy(h, data=data, major=major)


def save_i32(path, values, shape=None):
    shape = shape or (len(values),)
    with open(path, "wb") as f:
        f.write(npy_bytes("<i4", repr(tuple(shape)), struct.pack(f"<{len(values)}i", *values)))


def save_f32(path, values, shape=None):
    shape = shape or (len(values),)
    with open(path, "wb") as f:
        f.write(npy_bytes("<f4", repr(tuple(shape)), struct.pack(f"<{len(values)}f", *values)))


ALIGN_OUT = ["sorted_token_ids.npy", "expert_ids.npy", "num_tokens_post_pad.npy"]


def align_set(d, seed=1):
    """`d` holding a previous align run's three outputs."""
    rc, _, err = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "-B", 4, "--device", "cpu",
                     "--seed", seed, "--out", d)
    expect(rc == 0, f"setup run failed: {err!r}")
    expect(sorted(map(os.fsdecode, os.listdir(d))) == sorted(ALIGN_OUT), f"setup outputs {os.listdir(d)}")


def align_again(d, seed=2):
    return run("align", "--tokens", 64, "--topk", 2, "-E", 8, "-B", 4, "--device", "cpu", "--seed", seed,
               "--out", d)


def gen_small(target):
    return run("gen", "act-and-mul", "--tokens", 2, "--d", 2, "-o", target)


# ------------------------------------------------------------------ 1. special output targets
@case
def out_gen_fifo(w):
    os.mkfifo(os.path.join(w, "t.npy"))
    before = snapshot(w)
    expect_error(gen_small(os.path.join(w, "t.npy")), rb"t\.npy: not replaced: it is a FIFO, not a regular file$")
    expect_unchanged(w, before, "folder")


@case
def out_gen_symlink_to_dev_null(w):
    # Never /dev/null itself: a regression run as root would replace it.
    os.symlink("/dev/null", os.path.join(w, "n.npy"))
    before = snapshot(w)
    expect_error(gen_small(os.path.join(w, "n.npy")), rb"n\.npy: not replaced: it is a character device")
    expect_unchanged(w, before, "folder")
    expect(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null is no longer a character device")


@case
def out_gen_fake_char_device(w):
    dev = os.path.join(w, "fake")
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        raise Skip("mknod needs root")
    before = snapshot(w)
    expect_error(gen_small(dev), rb"fake: not replaced: it is a character device")
    expect_unchanged(w, before, "folder")


@case
def out_gen_directory(w):
    os.mkdir(os.path.join(w, "d.npy"))
    before = snapshot(w)
    expect_error(gen_small(os.path.join(w, "d.npy")), rb"d\.npy: not replaced: it is a directory")
    expect_unchanged(w, before, "folder")


@case
def out_folder_member_fifo(w):
    o = os.path.join(w, "o")
    align_set(o)
    os.remove(os.path.join(o, "expert_ids.npy"))
    os.mkfifo(os.path.join(o, "expert_ids.npy"))
    before = snapshot(o)
    expect_error(align_again(o), rb"expert_ids\.npy: not replaced: it is a FIFO")
    expect_unchanged(o, before)


@case
def out_folder_member_symlink_to_dev_null(w):
    o = os.path.join(w, "o")
    align_set(o)
    os.remove(os.path.join(o, "num_tokens_post_pad.npy"))
    os.symlink("/dev/null", os.path.join(o, "num_tokens_post_pad.npy"))
    before = snapshot(o)
    expect_error(align_again(o), rb"num_tokens_post_pad\.npy: not replaced: it is a character device")
    expect_unchanged(o, before)


# ------------------------------------------------------------------ 5. all-or-nothing output sets
@case
def out_folder_member_directory_keeps_previous_set(w):
    # The reproduction: the second file of the set cannot be replaced.
    o = os.path.join(w, "o")
    align_set(o)
    os.remove(os.path.join(o, "expert_ids.npy"))
    os.mkdir(os.path.join(o, "expert_ids.npy"))
    before = snapshot(o)
    expect_error(align_again(o), rb"expert_ids\.npy: not replaced: it is a directory")
    expect_unchanged(o, before)


@case
def out_folder_replaced_as_a_whole(w):
    o = os.path.join(w, "o")
    align_set(o, seed=1)
    first = snapshot(o)
    rc, _, err = align_again(o, seed=2)
    expect(rc == 0, f"exit {rc}: {err!r}")
    second = snapshot(o)
    expect(sorted(second) == sorted(ALIGN_OUT), f"entries {sorted(second)}")
    expect(second["sorted_token_ids.npy"] != first["sorted_token_ids.npy"], "the set was not replaced")


@case
def out_folder_is_a_file(w):
    f = os.path.join(w, "o")
    open(f, "wb").close()
    before = snapshot(w)
    expect_error(align_again(f), rb"o: cannot create output folder")
    expect_unchanged(w, before, "folder")


# ------------------------------------------------------------------ 7. read-only outputs: refused
@case
def out_gen_read_only_file(w):
    t = os.path.join(w, "ro.npy")
    rc, _, err = gen_small(t)
    expect(rc == 0, f"setup: {err!r}")
    os.chmod(t, 0o444)
    before = snapshot(w)
    expect_error(gen_small(t), rb"ro\.npy: not replaced: the file is read-only \(mode 0444\)")
    expect_unchanged(w, before, "folder")


@case
def out_folder_member_read_only(w):
    o = os.path.join(w, "o")
    align_set(o)
    os.chmod(os.path.join(o, "num_tokens_post_pad.npy"), 0o444)
    before = snapshot(o)
    expect_error(align_again(o), rb"num_tokens_post_pad\.npy: not replaced: the file is read-only")
    expect_unchanged(o, before)


# ------------------------------------------------------------------ 4. special input files (no hang)
def fifo_input(w):
    f = os.path.join(w, "f.npy")
    os.mkfifo(f)
    return f


def input_refused(w, args, pattern=rb"f\.npy: not a regular file \(a FIFO\)$"):
    o = os.path.join(w, "o")
    expect_error(run(*args, "--out", o, timeout=15), pattern)
    expect(not os.path.exists(o), "an output folder was created for a refused input")


@case
def in_info_fifo(w):
    expect_error(run("info", fifo_input(w), timeout=15), rb"f\.npy: not a regular file \(a FIFO\)$")


@case
def in_align_topk_ids_fifo(w):
    input_refused(w, ["align", "--topk-ids", fifo_input(w), "-E", 8, "--device", "cpu"])


@case
def in_align_expert_map_fifo(w):
    ids = os.path.join(w, "ids.npy")
    save_i32(ids, [0, 1, 2, 3], (2, 2))
    input_refused(w, ["align", "--topk-ids", ids, "-E", 8, "--expert-map", fifo_input(w), "--device", "cpu"])


@case
def in_dedup_indices_fifo(w):
    input_refused(w, ["dedup", "--indices", fifo_input(w), "-M", 1, "--device", "cpu"])


@case
def in_act_input_fifo(w):
    input_refused(w, ["act-and-mul", "--input", fifo_input(w), "--device", "cpu"])


@case
def in_route_inputs_fifo(w):
    input_refused(w, ["route", "--logits", fifo_input(w), "--topk", 2, "--device", "cpu"])
    os.remove(os.path.join(w, "f.npy"))
    logits = os.path.join(w, "l.npy")
    save_f32(logits, [0.0] * 8, (2, 4))
    input_refused(w, ["route", "--logits", logits, "--topk", 2, "--correction-bias", fifo_input(w), "--device", "cpu"])


@case
def in_permute_and_combine_inputs_fifo(w):
    ids = os.path.join(w, "ids.npy")
    save_i32(ids, [0, 1, 2, 3], (2, 2))
    input_refused(w, ["permute", "--hidden", fifo_input(w), "--topk-ids", ids, "-E", 8, "--device", "cpu"])
    os.remove(os.path.join(w, "f.npy"))
    w8 = os.path.join(w, "w.npy")
    save_f32(w8, [1.0] * 4, (2, 2))
    input_refused(w, ["combine", "--expert-out", fifo_input(w), "--inverse", ids, "--topk-weights", w8,
                      "--device", "cpu"])


@case
def in_moe_path_inputs_fifo(w):
    ids = os.path.join(w, "ids.npy")
    save_i32(ids, [0, 1, 2, 3], (2, 2))
    w8 = os.path.join(w, "w.npy")
    save_f32(w8, [1.0] * 4, (2, 2))
    logits = os.path.join(w, "l.npy")
    save_f32(logits, [0.0] * 8, (2, 4))
    fifo = os.path.join(w, "f.npy")
    for args in (["--logits", "{f}", "--topk", 2],
                 ["--logits", logits, "--topk", 2, "--correction-bias", "{f}"],
                 ["--logits", logits, "--topk", 2, "--hidden", "{f}"],
                 ["--topk-ids", "{f}", "--topk-weights", w8, "-E", 8],
                 ["--topk-ids", ids, "--topk-weights", "{f}", "-E", 8],
                 ["--topk-ids", ids, "--topk-weights", w8, "-E", 8, "--experts", "ffn", "--w1", "{f}", "--w2", w8],
                 ["--topk-ids", ids, "--topk-weights", w8, "-E", 8, "--experts", "ffn", "--w1", w8, "--w2", "{f}"]):
        if os.path.exists(fifo):
            os.remove(fifo)
        fifo_input(w)
        input_refused(w, ["moe-path", *[fifo if a == "{f}" else a for a in args], "--device", "cpu"])


@case
def in_info_char_device(w):
    expect_error(run("info", "/dev/zero", timeout=15), rb"/dev/zero: not a regular file \(a character device\)$")


@case
def in_align_topk_ids_char_device(w):
    input_refused(w, ["align", "--topk-ids", "/dev/zero", "-E", 8, "--device", "cpu"],
                  rb"/dev/zero: not a regular file \(a character device\)$")


# ------------------------------------------------------------------ 3. rank: capped at 64, linear
@case
def npy_rank_500000_fortran(w):
    # 1 MB of header: 500 000 dimensions of size 1, Fortran order (was a CPU hang).
    f = os.path.join(w, "r.npy")
    with open(f, "wb") as fh:
        fh.write(npy_bytes("<i4", "(" + "1," * 500000 + ")", b"\0" * 4, fortran=True, major=2))
    t0 = time.monotonic()
    expect_error(run("info", f, timeout=20), rb"r\.npy: bad header: a tuple or list of more than 64 items")
    expect(time.monotonic() - t0 < 10, "took too long to refuse")


@case
def npy_rank_65(w):
    f = os.path.join(w, "r.npy")
    with open(f, "wb") as fh:
        fh.write(npy_bytes("<i4", "(" + "1, " * 65 + ")", b"\0" * 4))
    expect_error(run("info", f), rb"r\.npy: bad header: a tuple or list of more than 64 items")


@case
def npy_rank_64_fortran_accepted(w):
    f = os.path.join(w, "r.npy")
    shape = [1] * 64
    shape[0], shape[40], shape[63] = 100000, 2, 3
    n = 100000 * 2 * 3
    with open(f, "wb") as fh:
        fh.write(npy_bytes("|u1", repr(tuple(shape)), bytes(i % 251 for i in range(n)), fortran=True))
    rc, out, err = run("info", f)
    expect(rc == 0, f"exit {rc}: {err!r}")
    expect(b"uint8 (100000, 1," in out and b"600000 elements" in out, f"stdout {out!r}")


# ------------------------------------------------------------------ 6. signals and stale temps
def interrupt_while_writing(w, sig):
    """Starts a large `gen -o`, sends `sig` once its temp file exists, and checks
    the process died of it with no temp left and the previous file intact."""
    t = os.path.join(w, "big.npy")
    save_i32(t, [1, 2, 3])
    with open(t, "rb") as f:
        previous = f.read()
    for attempt in range(5):
        # 128 MiB: generated in a fraction of a second, written for longer.
        p = subprocess.Popen([MOEKIT, "gen", "act-and-mul", "--tokens", "2048", "--d", "8192", "--dtype", "f32",
                              "-o", t], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        caught = False
        while p.poll() is None and time.monotonic() < deadline:
            if any(n != "big.npy" for n in os.listdir(w)):  # the temp file exists
                p.send_signal(sig)
                caught = True
                break
            time.sleep(0.0005)
        p.wait(timeout=60)
        p.stderr.close()
        if caught:
            expect(p.returncode == -sig, f"exit status {p.returncode}, want death by signal {sig}")
            left = sorted(os.listdir(w))
            expect(left == ["big.npy"], f"left behind: {left}")
            with open(t, "rb") as f:
                expect(f.read() == previous, "the previous file changed")
            return
        # Finished before we saw the temp: restore the previous file and retry.
        save_i32(t, [1, 2, 3])
    raise Skip("the write was always faster than the poll; nothing was interrupted")


@case
def signal_sigint_while_writing(w):
    interrupt_while_writing(w, signal.SIGINT)


@case
def signal_sigterm_while_writing(w):
    interrupt_while_writing(w, signal.SIGTERM)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@case
def stale_temps_cleaned(w):
    t = os.path.join(w, "t.npy")
    stale = f".t.npy.moekit-{dead_pid()}-0.tmp"
    live = f".t.npy.moekit-{os.getpid()}-0.tmp"  # this script is alive: not stale
    unrelated = f".u.npy.moekit-{dead_pid()}-0.tmp"
    for n in (stale, live, unrelated):
        with open(os.path.join(w, n), "wb") as f:
            f.write(b"x" * 1000)
    rc, _, err = gen_small(t)
    expect(rc == 0, f"exit {rc}: {err!r}")
    left = sorted(os.listdir(w))
    expect(left == sorted(["t.npy", live, unrelated]), f"entries after the run: {left}")


# ------------------------------------------------------------------ 10. valid JSON for any file name
WEIRD = [b"tab\there.npy", b"new\nline.npy", b"esc\x1b[31m.npy", b'quote"back\\slash.npy', b"bad\xff\xfeutf8.npy",
         b"caf\xc3\xa9.npy", b"c1\xc2\x9b.npy", b"ls\xe2\x80\xa8.npy"]


@case
def json_info_weird_names(w):
    wb = os.fsencode(w)
    paths = []
    for n in WEIRD:
        p = os.path.join(wb, n)
        save_i32(p, [1, 2, 3, 4], (2, 2))
        paths.append(p)
    rc, out, err = run("info", "--format", "json", *paths)
    expect(rc == 0, f"exit {rc}: {err!r}")
    expect(not re.search(rb"[\x00-\x1f\x7f]", out.replace(b"\n", b"")), f"raw control bytes in stdout: {out!r}")
    lines = out.decode("utf-8").splitlines()  # must be UTF-8 too
    expect(len(lines) == len(paths), f"{len(lines)} lines for {len(paths)} files")
    for p, line in zip(paths, lines):
        o = json.loads(line)
        expect(os.fsencode(o["file"]) == p, f"file name not lossless: {o['file']!r} vs {p!r}")
        expect(o["shape"] == [2, 2] and o["numel"] == 4, f"{o}")


@case
def json_report_outputs_weird_folder(w):
    o = os.path.join(os.fsencode(w), b"out\t\x1b\xff\nx")
    rc, out, err = run("dedup", "--batch", 1, "-M", 1, "--k", 4, "--device", "cpu", "--format", "json", "--out", o)
    expect(rc == 0, f"exit {rc}: {err!r}")
    rep = json.loads(out.decode("utf-8"))
    expect([os.fsencode(x) for x in rep["outputs"]] == [os.path.join(o, b"dedup.npy")], f"outputs {rep['outputs']!r}")


# ------------------------------------------------------------------ 15. paths in error lines
@case
def errpath_info_missing_weird_name(w):
    p = os.path.join(os.fsencode(w), b"no\nsuch\x1b[2J\xff.npy")
    expect_error(run("info", p), rb"no\\x0asuch\\x1b\[2J\\xff\.npy: cannot open: No such file or directory$")


@case
def errpath_malformed_weird_name(w):
    p = os.path.join(os.fsencode(w), b"bad\r\x1b]0;title\x07.npy")
    with open(p, "wb") as f:
        f.write(b"not an array")
    expect_error(run("align", "--topk-ids", p, "-E", 8, "--device", "cpu"),
                 rb"bad\\x0d\\x1b\]0;title\\x07\.npy: not a \.npy file")


@case
def errpath_gen_output_weird_folder(w):
    p = os.path.join(os.fsencode(w), b"missing\ndir", b"x.npy")
    expect_error(gen_small(p), rb"missing\\x0adir/x\.npy: cannot write: cannot create a temporary file in "
                               rb"'.*missing\\x0adir'")


@case
def errpath_output_folder_member_weird(w):
    o = os.path.join(os.fsencode(w), b"o\x1b")
    align_set(o)
    os.chmod(os.path.join(o, b"expert_ids.npy"), 0o444)
    before = snapshot(o)
    expect_error(align_again(o), rb"o\\x1b/expert_ids\.npy: not replaced: the file is read-only")
    expect_unchanged(o, before)


# ------------------------------------------------------------------ 15b. user-given words in messages and labels
# Command names, variant names, list items and option values are echoed the
# way paths are: printable, one line, \xNN for what is not (issue 31).
HOSTILE_WORD = b"x\ny\x1b[2J\xc2\x9bz\xef\xbf\xbf"
HOSTILE_SHOWN = rb"x\\x0ay\\x1b\[2J\\xc2\\x9bz\\xef\\xbf\\xbf"


@case
def msg_unknown_command_escaped(w):
    expect_error(run(HOSTILE_WORD), rb"unknown command '" + HOSTILE_SHOWN + rb"'")


@case
def msg_unknown_variant_escaped(w):
    expect_error(run("dedup", "--batch", 1, "-M", 1, "--k", 4, "--device", "cpu", "--variant", HOSTILE_WORD),
                 rb"unknown dedup variant '" + HOSTILE_SHOWN + rb"'")


@case
def msg_refused_option_value_escaped(w):
    # CLI11's own messages quote the value as typed.
    expect_error(run("dedup", "--batch", HOSTILE_WORD, "-M", 1, "--k", 4, "--device", "cpu"), HOSTILE_SHOWN)
    expect_error(run("dedup", "--batch", 1, "-M", 1, "--k", 4, "--device", "cpu", "--format", HOSTILE_WORD),
                 HOSTILE_SHOWN)
    expect_error(run("variants", HOSTILE_WORD), rb"unknown op '" + HOSTILE_SHOWN + rb"'")
    expect_error(run("gen", "align", "--tokens", 4, "--topk", 2, "-E", 8, "--dist", HOSTILE_WORD + b":1",
                     "-o", os.path.join(w, "t.npy")), HOSTILE_SHOWN)


@case
def msg_sweep_labels_escaped(w):
    # The sweep's cell labels (stdout headers, stderr lines) show the items printable.
    rc, out, err = run("dedup", "--batch", 1, "-M", 1, "--k", 4, "--device", "cpu", "--variant",
                       HOSTILE_WORD + b",auto")
    expect(rc == 2, f"exit {rc}: {err!r}")
    expect(not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xef\xbf[\xbe\xbf]", out),
           f"raw control bytes in stdout: {out!r}")
    expect(re.search(rb"^== sweep cell 1/2: variant=" + HOSTILE_SHOWN + rb"$", out, re.M), f"stdout {out!r}")
    expect_error((rc, b"", err),
                 rb"unknown dedup variant '" + HOSTILE_SHOWN + rb"'.*\(variant=" + HOSTILE_SHOWN + rb"\)$")


# ------------------------------------------------------------------ 19. info: headers only, every file
@case
def info_reports_every_file(w):
    good1, good2 = os.path.join(w, "g1.npy"), os.path.join(w, "g2.npy")
    bad, missing = os.path.join(w, "bad.npy"), os.path.join(w, "missing.npy")
    save_i32(good1, [1, 2])
    save_i32(good2, [1, 2, 3, 4, 5, 6], (2, 3))
    with open(bad, "wb") as f:
        f.write(npy_corpus.CASES["truncated_data"])
    rc, out, err = run("info", good1, bad, missing, good2)
    expect(rc == 2, f"exit {rc}, want 2")
    lines = out.decode().splitlines()
    expect(len(lines) == 2 and "g1.npy: int32 (2,)" in lines[0] and "g2.npy: int32 (2, 3)" in lines[1],
           f"stdout {out!r}")
    errs = err.decode().splitlines()
    expect(len(errs) == 2 and errs[0].startswith("moekit: ") and "bad.npy: truncated" in errs[0]
           and "missing.npy: cannot open" in errs[1], f"stderr {err!r}")


@case
def info_reads_headers_only(w):
    # A sparse 4 GiB file: info must not read (or allocate) its data.
    f = os.path.join(w, "big.npy")
    n = 1 << 32
    with open(f, "wb") as fh:
        fh.write(npy_bytes("|u1", f"({n},)", b""))
        fh.truncate(fh.tell() + n)

    def cap():
        import resource
        lim = 1 << 30
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    t0 = time.monotonic()
    rc, out, err = run("info", f, preexec_fn=cap, timeout=30)
    expect(rc == 0, f"exit {rc}: {err!r}")
    expect(f"uint8 ({n},) ({n} elements)".encode() in out, f"stdout {out!r}")
    expect(time.monotonic() - t0 < 5, "info took too long: does it read the data?")


# ------------------------------------------------------------------ 20. integrity: sets of any size, concurrent writers
def load_npy_rows(path, descr, code):
    """[[row 0], ...] of a 2-D .npy of dtype `descr` (v1 header, as moekit writes); `code`: its struct letter."""
    import ast
    with open(path, "rb") as f:
        b = f.read()
    expect(b[:8] == b"\x93NUMPY\x01\x00", f"{path}: not a v1 .npy")
    hl = struct.unpack("<H", b[8:10])[0]
    hdr = ast.literal_eval(b[10:10 + hl].decode("latin1"))
    expect(hdr["descr"] == descr and len(hdr["shape"]) == 2, f"{path}: {hdr}")
    t, k = hdr["shape"]
    v = struct.unpack(f"<{t * k}{code}", b[10 + hl:])
    return [list(v[i:i + k]) for i in range(0, t * k, k)]


def load_i32_rows(path):
    """[[ids of token 0], ...] of an int32 [T, K] .npy."""
    return load_npy_rows(path, "<i4", "i")


def layers_jsonl(path, layers, tokens=2, topk=2, salt=0, big_layer=None, big_tokens=0):
    """A jsonl dump of `layers` layers; expected {file name: rows}. Ids depend on `salt`."""
    want = {}
    with open(path, "w") as f:
        for l in range(layers):
            n = big_tokens if l == big_layer else tokens
            rows = [[(l * 7 + t * 3 + j + salt) % 256 for j in range(topk)] for t in range(n)]
            want[f"layer{l}.npy"] = rows
            for r in rows:
                f.write(json.dumps({"layer": l, "experts": r}) + "\n")
    return want


def no_temps(d):
    left = [n for n in os.listdir(d) if ".moekit" in n or n.endswith(".tmp")]
    expect(not left, f"left behind in {d}: {sorted(left)[:5]} ({len(left)} in all)")


@case
def integrity_trace_import_many_layers(w):
    # DeepSeek-V3's 58 MoE layers, Qwen3-235B's 94, and 128: every layer written, nothing else.
    for layers in (58, 94, 128):
        src = os.path.join(w, f"t{layers}.jsonl")
        want = layers_jsonl(src, layers)
        o = os.path.join(w, f"o{layers}")
        rc, out, err = run("trace", "import", "jsonl", src, "-o", o)
        expect(rc == 0, f"{layers} layers: exit {rc}: {err!r}")
        expect(sorted(os.listdir(o)) == sorted(want), f"{layers} layers: files {sorted(os.listdir(o))[:5]}...")
        for n, rows in want.items():
            expect(load_i32_rows(os.path.join(o, n)) == rows, f"{layers} layers: {n} differs")
        expect(out.count(b"wrote ") == layers, f"{layers} layers: stdout lists {out.count(b'wrote ')} files")
        # Replaced as a set too (each previous file kept until the commit ends).
        want2 = layers_jsonl(src, layers, salt=1)
        rc, _, err = run("trace", "import", "jsonl", src, "-o", o)
        expect(rc == 0, f"{layers} layers, again: exit {rc}: {err!r}")
        expect(sorted(os.listdir(o)) == sorted(want2), f"{layers} layers, again: {sorted(os.listdir(o))[:5]}...")
        expect(all(load_i32_rows(os.path.join(o, n)) == rows for n, rows in want2.items()), "second set differs")


@case
def integrity_many_layers_failure_leaves_no_temp(w):
    # 128 layers whose last one is larger than the file size limit: the write of
    # its temp fails after 127 temps exist; every one must go, the folder stays.
    src = os.path.join(w, "t.jsonl")
    layers_jsonl(src, 128, big_layer=127, big_tokens=4000, topk=8)
    o = os.path.join(w, "o")
    os.makedirs(o)
    save_i32(os.path.join(o, "layer5.npy"), [1, 2], (1, 2))
    before = snapshot(o)

    def cap():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    expect_error(run("trace", "import", "jsonl", src, "-o", o, preexec_fn=cap), rb"layer127\.npy: cannot write: ")
    expect_unchanged(o, before)


def concurrent_trials(w, name, argv_of, want_of, seeds, trials):
    """Runs `argv_of(seed, out)` for every seed at once on one folder, `trials`
    times; the folder must end as exactly one run's set (`want_of(seed)`, files
    -> bytes), every run exiting 0."""
    o = os.path.join(w, name)
    sets = {s: want_of(s) for s in seeds}
    names = set().union(*(set(v) for v in sets.values()))
    for t in range(trials):
        procs = [subprocess.Popen([MOEKIT, *map(str, argv_of(s, o))], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for s in seeds]
        for p in procs:
            try:
                _, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                raise Fail(f"trial {t}: a concurrent run still running after 60 s (hang)")
            expect(p.returncode == 0, f"trial {t}: a concurrent run exited {p.returncode}: {err!r}")
        no_temps(o)
        got = {}
        for n in os.listdir(o):
            with open(os.path.join(o, n), "rb") as f:
                got[n] = f.read()
        expect(set(got) == names, f"trial {t}: files {sorted(got)}")
        winners = [s for s, v in sets.items() if v == got]
        if not winners:
            from_seed = {n: [s for s in seeds if sets[s].get(n) == b] for n, b in got.items()}
            raise Fail(f"trial {t}: a mixed set: file -> the runs it came from: {from_seed}")


def read_set(d):
    out = {}
    for n in os.listdir(d):
        with open(os.path.join(d, n), "rb") as f:
            out[n] = f.read()
    return out


@case
def integrity_concurrent_runs_one_out_folder(w):
    # Four kernel runs with different seeds on one --out: one run's whole set
    # wins (--no-check: before the folder lock, a mixed set came within 5 to 20
    # trials). With the CPU check, each run reads back its own files, not
    # another's (before, the check failed in the first trial or two).
    for check in ("--no-check", "--check"):
        def argv(seed, o):
            return ["align", "--tokens", 512, "--topk", 4, "-E", 64, "-B", 16, "--device", "cpu", "--seed", seed,
                    "--out", o, check]

        def want(seed):
            d = os.path.join(w, f"alone{seed}{check}")
            rc, _, err = run(*argv(seed, d))
            expect(rc == 0, f"setup: {err!r}")
            return read_set(d)

        concurrent_trials(w, "o" + check, argv, want, seeds=[1, 2, 3, 4], trials=40 if check == "--no-check" else 10)


@case
def integrity_leftover_lock_file(w):
    # An unlocked .moekit.lock (its holder was SIGKILLed) is used and removed;
    # one that is not a regular file stops the run with every temp removed.
    o = os.path.join(w, "o")
    align_set(o)
    with open(os.path.join(o, ".moekit.lock"), "w") as f:
        f.write("12345\n")
    rc, _, err = align_again(o)
    expect(rc == 0, f"exit {rc}: {err!r}")
    expect(sorted(os.listdir(o)) == sorted(ALIGN_OUT), f"left: {sorted(os.listdir(o))}")
    os.symlink("/dev/null", os.path.join(o, ".moekit.lock"))
    before = snapshot(o)
    expect_error(align_again(o, seed=3), rb"o/\.moekit\.lock: cannot write: cannot open the folder's lock file")
    expect_unchanged(o, before)


# ------------------------------------------------------------------ 21. --results: checked before the run
def results_refused(w, target, pattern, *extra, out=None, inputs=None):
    """`align --results target` must stop before the run: exit 2, one stderr
    line, nothing on stdout, the --out folder (holding a previous set) and the
    target unchanged. `inputs`: align's input options instead of generated ones."""
    o = out or os.path.join(w, "o")
    if not os.path.exists(o):
        align_set(o)
    before = snapshot(o)
    t_before = snapshot(os.path.dirname(target)) if os.path.isdir(os.path.dirname(target)) else None
    res = run("align", *(inputs or ["--tokens", 64, "--topk", 2, "--seed", 2]), "-E", 8, "-B", 4, "--device", "cpu",
              "--out", o, "--results", target, *extra)
    expect_error(res, pattern)
    expect(res[1] == b"", f"a report was printed: {res[1]!r}")
    expect_unchanged(o, before)
    if t_before is not None and os.path.dirname(target) != o:
        expect(snapshot(os.path.dirname(target)) == t_before, "the --results target's folder changed")


@case
def results_directory(w):
    d = os.path.join(w, "d")
    os.makedirs(d)
    results_refused(w, d, rb"d: --results: it is a directory")


@case
def results_fifo(w):
    f = os.path.join(w, "fifo")
    os.mkfifo(f)
    results_refused(w, f, rb"fifo: --results: it is a FIFO")


@case
def results_missing_folder(w):
    results_refused(w, os.path.join(w, "no", "such", "r.jsonl"), rb"r\.jsonl: --results: the folder .*no/such "
                                                                 rb"does not exist")


@case
def results_read_only(w):
    f = os.path.join(w, "r.jsonl")
    with open(f, "w") as fh:
        fh.write('{"op": "align", "variant": "x"}\n')
    os.chmod(f, 0o444)  # refused even for root, as read-only outputs are
    results_refused(w, f, rb"r\.jsonl: --results: the file is read-only \(mode 0444\)")


@case
def results_is_the_input(w):
    ids = os.path.join(w, "ids.dat")  # an input without the .npy name
    save_i32(ids, list(range(8)), (4, 2))
    for spelling in (ids, os.path.join(w, ".", "ids.dat")):
        results_refused(w, spelling, rb"--results: it is this run's input .*ids\.dat \(given to --topk-ids\)",
                        inputs=["--topk-ids", ids])
    # a hard link is the same file too
    link = os.path.join(w, "link.jsonl")
    os.link(ids, link)
    results_refused(w, link, rb"--results: it is this run's input", inputs=["--topk-ids", ids])


@case
def results_is_an_output(w):
    o = os.path.join(w, "o")
    align_set(o)
    for name in ALIGN_OUT:  # this run's own outputs
        results_refused(w, os.path.join(o, name), rb"--results: a \.npy name", out=o)
    results_refused(w, os.path.join(o, "timings.npy"), rb"--results: a \.npy name", "--bench", out=o)
    results_refused(w, os.path.join(w, "new.NPY"), rb"--results: a \.npy name")


@case
def results_holds_an_array(w):
    f = os.path.join(w, "arr.bin")
    save_i32(f, [1, 2, 3])
    results_refused(w, f, rb"arr\.bin: --results: the file is a \.npy array")


@case
def results_is_the_out_folder(w):
    o = os.path.join(w, "newout")
    res = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "-B", 4, "--device", "cpu", "--out", o,
              "--results", o)
    expect_error(res, rb"newout: --results: it is the --out folder")
    expect(not os.path.exists(o), "the --out folder was created")
    res = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "-B", 4, "--device", "cpu", "--out",
              os.path.join(o, "sub"), "--results", o)
    expect_error(res, rb"newout: --results: it is the --out folder \(or a folder above it\)")
    expect(not os.path.exists(o), "the --out folder was created")


@case
def results_refused_before_a_sweep(w):
    d = os.path.join(w, "d")
    os.makedirs(d)
    o = os.path.join(w, "o")
    for fmt_ in ("text", "json"):
        rc, out, err = run("align", "--tokens", "64,128", "--topk", 2, "-E", 8, "--device", "cpu", "--out", o,
                           "--format", fmt_, "--results", d)
        lines = [l for l in err.split(b"\n") if l.strip()]
        expect(rc == 2 and len(lines) == 1 and b"--results: it is a directory" in lines[0],
               f"{fmt_}: exit {rc}, stderr {err!r}")
        expect(not os.path.exists(o), f"{fmt_}: a cell ran: {o} exists")
        if fmt_ == "text":
            expect(out == b"", f"a cell ran: {out!r}")
        else:  # one error object, as a failed single run prints
            objs = [json.loads(l) for l in out.decode().splitlines()]
            expect(len(objs) == 1 and objs[0].get("error"), f"stdout {out!r}")


@case
def results_good_targets_still_work(w):
    # New file in an existing folder, an existing records file, a file inside the --out folder.
    o = os.path.join(w, "o")
    for target in (os.path.join(w, "new.jsonl"), os.path.join(w, "new.jsonl"), os.path.join(o, "r.jsonl")):
        rc, out, err = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "-B", 4, "--device", "cpu", "--out", o,
                           "--results", target)
        expect(rc == 0, f"{target}: exit {rc}: {err!r}")
    with open(os.path.join(w, "new.jsonl")) as f:
        expect([json.loads(l)["op"] for l in f.read().splitlines()] == ["align", "align"], "two records")


@case
def results_newline_guard_after_cut_line(w):
    # A file whose last record was cut (no final newline): the next record
    # starts a line of its own, complete, instead of being glued to the cut one.
    f = os.path.join(w, "r.jsonl")
    rc, _, err = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "--device", "cpu", "--results", f)
    expect(rc == 0, f"exit {rc}: {err!r}")
    with open(f, "rb") as fh:
        first = fh.read()
    cut = b'{"op": "align", "variant": "ref'
    with open(f, "ab") as fh:
        fh.write(cut)
    rc, _, err = run("align", "--tokens", 128, "--topk", 2, "-E", 8, "--device", "cpu", "--results", f)
    expect(rc == 0, f"exit {rc}: {err!r}")
    with open(f, "rb") as fh:
        body = fh.read()
    expect(body.startswith(first + cut + b"\n"), f"the cut line was not ended by a newline: {body[len(first):][:80]!r}")
    lines = body.split(b"\n")
    expect(lines[-1] == b"" and lines[1] == cut, f"lines {lines!r}")
    rec = json.loads(lines[2])
    expect(rec["op"] == "align" and rec["params"]["tokens"] == 128, f"the new record: {rec}")
    # `compare` then names the cut line, not the new record's.
    expect_error(run("compare", f, f), rb"r\.jsonl:2: ")
    # A whole last line gets no extra newline.
    rc, _, _ = run("align", "--tokens", 64, "--topk", 2, "-E", 8, "--device", "cpu", "--results", f)
    with open(f, "rb") as fh:
        expect(fh.read().count(b"\n") == 4, "an extra newline after a whole line")


# ------------------------------------------------------------------ 22. an output never replaces an input
@case
def plot_output_is_an_input(w):
    r = os.path.join(w, "r.jsonl")
    rc, _, err = run("align", "--tokens", "64,128", "--topk", 2, "-E", 8, "--device", "cpu", "--bench", "--iters", 3,
                     "--results", r)
    expect(rc == 0, f"setup: exit {rc}: {err!r}")
    before = snapshot(w)
    os.link(r, os.path.join(w, "hard.jsonl"))
    os.symlink("r.jsonl", os.path.join(w, "sym.jsonl"))
    before = snapshot(w)
    for target in (r, os.path.join(w, ".", "r.jsonl"), os.path.join(w, "hard.jsonl"), os.path.join(w, "sym.jsonl")):
        expect_error(run("plot", r, "-o", target), rb"not written: it is the input .*r\.jsonl of this command")
        expect_unchanged(w, before, "folder")
    # the second of several inputs too
    r2 = os.path.join(w, "r2.jsonl")
    shutil.copy(r, r2)
    before = snapshot(w)
    expect_error(run("plot", r, r2, "-o", r2), rb"r2\.jsonl: not written: it is the input")
    expect_unchanged(w, before, "folder")
    rc, _, err = run("plot", r, r2, "-o", os.path.join(w, "r.svg"))
    expect(rc == 0, f"a plot to another file: exit {rc}: {err!r}")


@case
def trace_import_output_is_an_input(w):
    o = os.path.join(w, "o")
    os.makedirs(o)
    src = os.path.join(o, "layer0.npy")  # a dump that happens to sit where layer 0 goes
    with open(src, "w") as f:
        f.write('{"layer": 0, "experts": [1, 2]}\n{"layer": 1, "experts": [3, 4]}\n')
    before = snapshot(o)
    expect_error(run("trace", "import", "jsonl", src, "-o", o), rb"layer0\.npy: not written: it is the input")
    expect_unchanged(o, before)


@case
def kernel_out_file_is_an_input(w):
    o = os.path.join(w, "o")
    os.makedirs(o)
    ids = os.path.join(o, "expert_ids.npy")  # a trace saved under a name align writes
    save_i32(ids, [1, 2, 3, 4, 5, 6, 7, 0], (4, 2))
    before = snapshot(o)
    expect_error(run("align", "--topk-ids", ids, "-E", 8, "--device", "cpu", "--out", o),
                 rb"o/expert_ids\.npy: not written: it is the input .*expert_ids\.npy of this command")
    expect_unchanged(o, before)
    rc, _, err = run("align", "--topk-ids", ids, "-E", 8, "--device", "cpu", "--out", os.path.join(w, "o2"))
    expect(rc == 0, f"another --out: exit {rc}: {err!r}")


@case
def gen_output_is_its_load_file(w):
    loads = os.path.join(w, "loads.npy")
    with open(loads, "wb") as f:
        f.write(npy_bytes("<i8", "(4,)", struct.pack("<4q", 5, 0, 5, 0)))
    before = snapshot(w)
    expect_error(run("gen", "align", "--tokens", 8, "--topk", 1, "-E", 4, "--dist", f"load:{loads}", "-o", loads),
                 rb"loads\.npy: not written: it is the input")
    expect_unchanged(w, before, "folder")


# ------------------------------------------------------------------ the malformed .npy corpus
# Each defect of tests/npy/npy_corpus.py given to `align --topk-ids` with an
# output folder holding a previous set: exit 2, this message, folder unchanged.
CORPUS_MESSAGES = {
    "empty_file": rb"not a \.npy file: only 0 bytes, too short",
    "too_short": rb"not a \.npy file: only 4 bytes, too short",
    "bad_magic": rb"not a \.npy file \(bad magic bytes\)",
    "text_file": rb"not a \.npy file \(bad magic bytes\)",
    "png_file": rb"not a \.npy file \(bad magic bytes\)",
    "version_4_0": rb"unsupported \.npy format version 4\.0",
    "version_1_1": rb"unsupported \.npy format version 1\.1",
    "version_0_0": rb"unsupported \.npy format version 0\.0",
    "header_len_past_eof": rb"header length 32767 runs past the end of the file",
    "v2_header_len_past_eof": rb"header length 4294967280 runs past the end of the file",
    "v2_file_ends_in_length": rb"truncated: file ends inside the header length",
    "header_len_zero": rb"empty header",
    "header_is_list": rb"bad header: header is not a dict",
    "header_is_string": rb"bad header: header is not a dict",
    "header_unclosed_dict": rb"bad header: header dict is not closed",
    "header_garbage_after_dict": rb"bad header: unexpected text after the header dict",
    "header_unterminated_string": rb"bad header: expected ':'",
    "header_non_ascii": rb"bad header: non-ASCII or control byte 0xff",
    "header_nul_byte": rb"bad header: non-ASCII or control byte 0x00",
    "header_v3_utf8_descr": rb"bad header: non-ASCII or control byte 0xc3",
    "header_python_call": rb"bad header: unexpected word '__import__'",
    "missing_descr": rb"bad header: missing key 'descr'",
    "missing_shape": rb"bad header: missing key 'shape'",
    "missing_fortran_order": rb"bad header: missing key 'fortran_order'",
    "extra_key": rb"bad header: unexpected key 'units'",
    "duplicate_key": rb"bad header: duplicate key 'descr'",
    "empty_dict": rb"bad header: missing key 'descr'",
    "descr_garbage": rb"unsupported dtype 'hello'",
    "descr_complex64": rb"unsupported dtype '<c8'",
    "descr_float128": rb"unsupported dtype '<f16'",
    "descr_object_pickle": rb"unsupported dtype '\|O'",
    "descr_unicode": rb"unsupported dtype '<U1'",
    "descr_datetime": rb"unsupported dtype '<M8\[ns\]'",
    "descr_void4": rb"unsupported dtype '\|V4'",
    "descr_structured": rb"structured \(record\) dtypes are not supported",
    "descr_not_string": rb"bad header: 'descr' must be a string, got an integer",
    "fortran_order_int": rb"bad header: 'fortran_order' must be True or False",
    "fortran_order_lowercase": rb"bad header: unexpected word 'false'",
    "shape_is_list": rb"bad header: 'shape' must be a tuple, got a list",
    "shape_paren_int": rb"bad header: 'shape' must be a tuple, got \(6\) -- a 1-d shape is written \(6,\)",
    "shape_is_string": rb"bad header: 'shape' must be a tuple, got a string",
    "shape_negative_dim": rb"bad header: negative dimension -2 in shape",
    "shape_float_dim": rb"bad header: '2\.5' is not an integer",
    "shape_dim_too_big_for_int64": rb"bad header: integer 99999999999999999999 does not fit in 64 bits",
    "numel_overflows_int64": rb"shape \(4294967296, 4294967296\) has too many elements \(overflows int64\)",
    "numel_overflow_beside_zero": rb"shape \(0, 4294967296, 4294967296\) has too many elements \(overflows int64\)",
    "bytes_overflow_int64": rb"shape \(2305843009213693952,\) is too large: its byte count overflows int64",
    "truncated_data": rb"truncated: shape \(2, 3\) of int32 needs 24 data bytes, the file has 23",
    "truncated_huge_shape": rb"truncated: shape \(1000000000000,\) of float64 needs 8000000000000 data bytes",
    "no_data_at_all": rb"truncated: shape \(2, 3\) of int32 needs 24 data bytes, the file has 0",
    "trailing_data": rb"4 bytes of trailing data after the array",
    "trailing_npy_appended": rb"152 bytes of trailing data after the array",
    "path_is_directory": rb"is a directory, not a \.npy file",
    "path_missing": rb"cannot open: No such file or directory",
}


def corpus_case(name):
    def f(w):
        path = npy_corpus.materialize(w, name)
        if name.startswith("ok_"):  # valid controls: described, exit 0
            rc, out, err = run("info", path)
            expect(rc == 0 and out.startswith(path.encode() + b": "), f"exit {rc}, stdout {out!r}, stderr {err!r}")
            return
        o = os.path.join(w, "o")
        align_set(o)
        before = snapshot(o)
        expect_error(run("align", "--topk-ids", path, "-E", 8, "--device", "cpu", "--out", o),
                     rb"^moekit: " + re.escape(path.encode()) + rb": " + CORPUS_MESSAGES[name])
        expect_unchanged(o, before)
    return f


for _n in npy_corpus.names():
    CASES["corpus_" + _n] = corpus_case(_n)


# ------------------------------------------------------------------ sizes from tiny inputs (issue 31)
# Every count multiplied into a size is checked before use, a zero dimension
# never makes a loop run over the other one, and memory estimates count what
# is allocated: each case runs with the address space capped at 2 GB, so an
# unchecked allocation shows as "out of host memory" and a loop as a hang.
def capped(gb=2):
    def cap():
        import resource
        lim = int(gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    return cap


def header_only(path, descr, shape):
    """A .npy of `shape` with no data bytes (a zero dimension: a valid file of ~128 bytes)."""
    with open(path, "wb") as f:
        f.write(npy_bytes(descr, repr(tuple(shape)), b""))


def sparse_npy(path, descr, shape, itemsize):
    """A valid .npy whose data is a hole: gigabytes on paper, no disk used."""
    n = 1
    for d in shape:
        n *= d
    with open(path, "wb") as f:
        f.write(npy_bytes(descr, repr(tuple(shape)), b""))
        f.truncate(f.tell() + n * itemsize)


@case
def size_trace_import_layers_topk_product_overflows(w):
    # --layers x --topk = 2^64 wrapped to 0: the modulo by it was a SIGFPE.
    d = os.path.join(w, "d.json")
    with open(d, "w") as f:
        f.write('{"routed_experts": "AAAAAAEAAAA="}\n')  # two int32 ids
    o = os.path.join(w, "out")
    expect_error(run("trace", "import", "json", d, "-o", o, "--layers", 2**32, "--topk", 2**32, timeout=10),
                 rb"d\.json:1: request 1 .*2 ids are not whole tokens of 4294967296 layers x top-4294967296")
    expect(not os.path.exists(o), "an output folder was made")


@case
def size_trace_stats_zero_topk_rows(w):
    # 2^40 tokens of no ids: nothing to count, at once (it looped for hours).
    f = os.path.join(w, "t.npy")
    header_only(f, "<i4", (2**40, 0))
    rc, out, err = run("trace", "stats", f, "-E", 8, "--format", "json", timeout=10, preexec_fn=capped())
    expect(rc == 0, f"exit {rc}: {err!r}")
    o = json.loads(out)
    expect(o["tokens"] == 2**40 and o["topk"] == 0 and o["slots"] == 0 and o["counts"] == [0] * 8, o)


@case
def size_combine_zero_width_rows(w):
    # [2^30, 0] expert rows: refused by shape, not by allocating a row table of 8 GB.
    x, inv, wt = (os.path.join(w, n) for n in ("x.npy", "inv.npy", "w.npy"))
    header_only(x, "<f4", (2**30, 0))
    save_i32(inv, [0], (1, 1))
    save_f32(wt, [1.0], (1, 1))
    expect_error(run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", wt, "--device", "cpu",
                     timeout=10, preexec_fn=capped()), rb"x\.npy: expert output rows must have H >= 1")


@case
def size_combine_huge_row_count_map_check(w):
    # 2^27 rows of H 1 (a 512 MB hole): the one-to-one check of the map costs
    # memory of the map's size, not 8 bytes per row (the old row table: 1 GB).
    x, inv, wt = (os.path.join(w, n) for n in ("x.npy", "inv.npy", "w.npy"))
    sparse_npy(x, "<f4", (2**27, 1), 4)
    save_i32(inv, [5, 2**27 - 1, 5], (1, 3))
    save_f32(wt, [1.0, 1.0, 1.0], (1, 3))
    expect_error(run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", wt, "--device", "cpu",
                     timeout=20, preexec_fn=capped(1)),
                 rb"inv\.npy: inverse\[0, 0\] and inverse\[0, 2\] both name row 5")


@case
def size_combine_zero_slot_map(w):
    # [2^40, 0] map and weights: K >= 1 is required (as for generated input).
    x, inv, wt = (os.path.join(w, n) for n in ("x.npy", "inv.npy", "w.npy"))
    save_f32(x, [1.0, 2.0], (1, 2))
    header_only(inv, "<i4", (2**40, 0))
    header_only(wt, "<f4", (2**40, 0))
    expect_error(run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", wt, "--device", "cpu",
                     timeout=10, preexec_fn=capped()), rb"inv\.npy: the inverse map must have K >= 1")


@case
def size_combine_big_input_names_the_file(w):
    # An 8 GiB expert-out (a hole) over the budget: the refusal names the file, before reading it.
    x, inv, wt = (os.path.join(w, n) for n in ("x.npy", "inv.npy", "w.npy"))
    sparse_npy(x, "<f4", (2**30, 2), 4)
    save_i32(inv, [0], (1, 1))
    save_f32(wt, [1.0], (1, 1))
    expect_error(run("combine", "--expert-out", x, "--inverse", inv, "--topk-weights", wt, "--device", "cpu",
                     timeout=10, preexec_fn=capped()), rb"this combine run \(\S*x\.npy: 1073741824 rows x H 2.*needs about")
    # any command reading it: the reader's own budget names the file
    expect_error(run("align", "--topk-ids", x, "-E", 8, "--device", "cpu", timeout=10, preexec_fn=capped()),
                 rb"x\.npy: reading its data needs about 8\.6 GB of host memory")


@case
def size_combine_estimate_counts_every_array(w):
    # The estimate counts the rows, map, weights, output, reference, the output
    # set's copy and the read-back file: a run under 1.9 GB that needs ~2.1 GB is
    # refused up front (it used to pass the estimate, 1.7 GB, and die "out of
    # host memory" after seconds of work).
    rc, out, err = run("combine", "--tokens", 21000, "--topk", 8, "--hidden-size", 4096, "--device", "cpu",
                       "--iters", 1, "--out", os.path.join(w, "o"), timeout=60, preexec_fn=capped(1.9))
    expect_error((rc, out, err), rb"this combine run needs about 2\.1 GB of host memory")


@case
def size_estimates_count_what_each_family_holds(w):
    # Under 1.9 GB, shapes whose estimate used to pass and whose run then died
    # "out of host memory" after seconds of work (outputs held four times, not
    # twice; align's widened ids made before its estimate; route's outputs and
    # align's not counted; permute's rows counted per slot, not per padded row
    # and copy): refused up front.
    o = os.path.join(w, "o")
    for args, what in (
            (["act-and-mul", "--tokens", 100000, "--d", 2048], rb"this act-and-mul run needs about"),
            (["dedup", "--batch", 9000, "-M", 2, "--k", 8192], rb"this dedup run needs about"),
            (["align", "--tokens", 40000000, "--topk", 8, "-E", 256], rb"this align run needs about"),
            (["moe-path", "--tokens", 20000, "--topk", 8, "-E", 64, "--hidden-size", 2048],
             rb"this moe-path run needs about"),
            (["permute", "--tokens", 12000, "--topk", 8, "-E", 64, "--hidden-size", 2048],
             rb"this permute run needs about"),
            (["route", "--tokens", 800000, "-E", 256, "--topk", 8, "--then-align", "-B", 64],
             rb"this route run needs about")):
        t = time.time()
        expect_error(run(*args, "--device", "cpu", "--iters", 1, "--out", o, timeout=60, preexec_fn=capped(1.9)), what)
        expect(time.time() - t < 5, f"{args[0]}: refused only after {time.time() - t:.1f} s")


@case
def size_dedup_zero_batches_of_huge_k(w):
    # [0, 2^30] indices: no row to sort, so no 4 GB scratch row either.
    f = os.path.join(w, "i.npy")
    header_only(f, "<i4", (0, 2**30))
    rc, out, err = run("dedup", "--indices", f, "-M", 1, "--device", "cpu", "--format", "json", timeout=10,
                       preexec_fn=capped())
    expect(rc == 0, f"exit {rc}: {err!r}")
    expect(json.loads(out)["params"]["batch"] == 0, out)


@case
def size_k_beyond_int32_refused(w):
    # K = 2^32 + 1 (no tokens, so a header-only file) was narrowed to int32 (K = 1) and run.
    ids, ids64, wt, h = (os.path.join(w, n) for n in ("ids.npy", "ids64.npy", "w.npy", "h.npy"))
    header_only(ids, "<i4", (0, 2**32 + 1))
    header_only(ids64, "<i8", (0, 2**32 + 1))
    header_only(wt, "<f4", (0, 2**32 + 1))
    save_f32(h, [], (0, 4))
    x = os.path.join(w, "x.npy")
    save_f32(x, [1.0, 2.0], (1, 2))
    k_msg = rb"ids(64)?\.npy: K \(the expert ids' last dimension\) = 4294967297 does not fit int32"
    expect_error(run("permute", "--hidden", h, "--topk-ids", ids, "-E", 8, "--device", "cpu"), k_msg)
    expect_error(run("permute", "--hidden", h, "--topk-ids", ids64, "-E", 8, "--device", "cpu"), k_msg)
    expect_error(run("moe-path", "--topk-ids", ids, "--topk-weights", wt, "-E", 8, "--hidden-size", 4,
                     "--device", "cpu"), k_msg)
    expect_error(run("combine", "--expert-out", x, "--inverse", ids, "--topk-weights", wt, "--device", "cpu"),
                 rb"ids\.npy: K \(the inverse map's last dimension\) = 4294967297 does not fit int32")



# ------------------------------------------------------------------ experts: bad input (issue 32)
# `moekit experts` and `moe-path --experts ffn` read hidden rows, ids, weights
# and the expert matrices W1 [E, 2I, H] and W2 [E, H, I]. Sizes come from the
# headers and are checked before anything is read: a tiny file claiming
# gigabytes is refused by name under a 1 GB address-space cap.
F16_ONE = 0x3C00


def save_16(path, shape, values=None, descr="<f2"):
    """A 2-byte .npy: float16 ('<f2') or bfloat16 ('|V2'), raw bit patterns (default: all 1.0 in f16)."""
    n = 1
    for d in shape:
        n *= d
    values = values if values is not None else [F16_ONE] * n
    with open(path, "wb") as f:
        f.write(npy_bytes(descr, repr(tuple(shape)), struct.pack(f"<{n}H", *values)))


def load_f16_rows(path):
    """[[floats of row 0], ...] of a float16 [T, H] .npy."""
    return load_npy_rows(path, "<f2", "e")


E_SMALL, H_SMALL, I_SMALL = 4, 8, 6


def experts_files(w, tokens=3):
    """hidden [T, H] f16, ids/weights [T, 2], W1 [E, 2I, H], W2 [E, H, I]: a valid set; their paths."""
    names = ("h.npy", "ids.npy", "wt.npy", "w1.npy", "w2.npy")
    h, ids, wt, w1, w2 = (os.path.join(w, n) for n in names)
    save_16(h, (tokens, H_SMALL), [0x3C00 + (i % 7) * 0x100 for i in range(tokens * H_SMALL)])
    save_i32(ids, [i % E_SMALL for i in range(tokens * 2)], (tokens, 2))
    save_f32(wt, [0.5] * (tokens * 2), (tokens, 2))
    n1 = E_SMALL * 2 * I_SMALL * H_SMALL
    save_16(w1, (E_SMALL, 2 * I_SMALL, H_SMALL), [0x2C00 + (i % 5) * 0x100 for i in range(n1)])
    save_16(w2, (E_SMALL, H_SMALL, I_SMALL), [0x2E00 - (i % 3) * 0x100 for i in range(E_SMALL * H_SMALL * I_SMALL)])
    return h, ids, wt, w1, w2


def experts_run(h, ids, wt, w1, w2, *extra, cap=1, timeout=20):
    args = ["experts", "--device", "cpu"]
    for opt, v in (("--hidden", h), ("--topk-ids", ids), ("--topk-weights", wt), ("--w1", w1), ("--w2", w2)):
        if v is not None:
            args += [opt, v]
    return run(*args, *extra, timeout=timeout, preexec_fn=capped(cap))


@case
def experts_huge_weight_headers_named(w):
    # W1/W2 headers of 16 GB (holes): refused at once, by size, naming the files.
    h, ids, wt, _, _ = experts_files(w)
    w1, w2 = os.path.join(w, "big1.npy"), os.path.join(w, "big2.npy")
    for (e, i, hh), pattern in (
            ((1, 65536, 65536),
             rb"2 \* I \* H must be below 2\^31 elements per expert.*big1\.npy \(1, 131072, 65536\)"),
            ((2**20, 32, 64), rb"no variant takes more than \d+ experts.*big1\.npy \(1048576, 64, 64\)"),
            ((4096, 1024, 1024),
             rb"this experts run needs about \S+ GB .*big1\.npy \(4096, 2048, 1024\), \S*big2\.npy")):
        sparse_npy(w1, "<f2", (e, 2 * i, hh), 2)
        sparse_npy(w2, "<f2", (e, hh, i), 2)
        t = time.monotonic()
        o = os.path.join(w, "o")
        expect_error(experts_run(None, None, None, w1, w2, "--tokens", 2, "--topk", 1, "--gen-dtype", "f16",
                                 "--out", o), pattern)
        expect(time.monotonic() - t < 5, f"E {e}: refused only after {time.monotonic() - t:.1f} s")
        expect(not os.path.exists(o), "an output folder was made")
    # a W2 header that claims more than W1: refused by shape, naming W2
    save_16(os.path.join(w, "w1.npy"), (E_SMALL, 2 * I_SMALL, H_SMALL))
    sparse_npy(w2, "<f2", (E_SMALL, H_SMALL, 2**30), 2)
    expect_error(experts_run(h, ids, wt, os.path.join(w, "w1.npy"), w2),
                 rb"big2\.npy: W2 must be \[E, H, I\] = \(4, 8, 6\) .*got \(4, 8, 1073741824\)")
    # E beyond int32 (a header-only file: the refusal is its size, not the read)
    header_only(w1, "<f2", (2**33, 2, 1))
    header_only(w2, "<f2", (2**33, 1, 1))
    expect_error(experts_run(None, None, None, w1, w2, "--tokens", 2, "--topk", 1, "--gen-dtype", "f16"),
                 rb"big1\.npy: ")


@case
def experts_huge_hidden_header_named(w):
    f = os.path.join(w, "hh.npy")
    sparse_npy(f, "<f2", (2**26, 4), 2)  # 512 MB of rows: over a 1 GB cap with what the run holds
    expect_error(experts_run(f, None, None, None, None, "-E", 4, "--topk", 1, "--inter-size", 4),
                 rb"this experts run needs about .*\(sizes from \S*hh\.npy \(67108864, 4\)\)$")
    sparse_npy(f, "<f2", (4, 2**28), 2)  # one H of 2^28: 2 I H over 2^31 with I = 4
    expect_error(experts_run(f, None, None, None, None, "-E", 4, "--topk", 1, "--inter-size", 4),
                 rb"2 \* I \* H must be below 2\^31 .*\(sizes from \S*hh\.npy \(4, 268435456\)\)$")
    sparse_npy(f, "<f2", (2**30, 4), 2)  # 8 GB: over the CPU run's multiply-add limit first
    expect_error(experts_run(f, None, None, None, None, "-E", 4, "--topk", 1, "--inter-size", 4),
                 rb"a CPU run computes every token: .*\(sizes from \S*hh\.npy \(1073741824, 4\)\)$")
    ids = os.path.join(w, "ids.npy")
    header_only(ids, "<i4", (2**40, 0))
    wt = os.path.join(w, "wt.npy")
    header_only(wt, "<f4", (2**40, 0))
    expect_error(experts_run(None, ids, wt, None, None, "-E", 4, "--hidden-size", 4, "--inter-size", 4),
                 rb"ids\.npy: expert ids must have K >= 1 per token")


@case
def experts_weight_shapes_disagree(w):
    h, ids, wt, w1, w2 = experts_files(w)
    E, H, I = E_SMALL, H_SMALL, I_SMALL
    bad = os.path.join(w, "bad.npy")
    for shape in ((E + 1, H, I), (E, H + 1, I), (E, H, I + 1), (E, I, H), (E, H * I), (E, H, I, 1)):
        save_16(bad, shape)
        expect_error(experts_run(h, ids, wt, w1, bad), rb"bad\.npy: W2 must be")
    for shape, pattern in (((E, 2 * I + 1, H), rb"bad\.npy: W1 must be \[E, 2I, H\] .*13 rows per expert is not 2I"),
                           ((E, 2 * I, H + 1), rb"bad\.npy: W1 rows have 9 columns, but H is 8 \(\S*h\.npy\)"),
                           ((0, 2 * I, H), rb"bad\.npy: W1 has no experts"),
                           ((E, 0, H), rb"bad\.npy: W1 must be \[E, 2I, H\]"),
                           ((E, 2 * I), rb"bad\.npy: W1 must be 3-D")):
        save_16(bad, shape)
        expect_error(experts_run(h, ids, wt, bad, w2), pattern)
    expect_error(experts_run(h, ids, wt, w1, w2, "-E", E + 1), rb"w1\.npy: W1 holds 4 experts, but -E is 5")
    # the hidden rows against the weights' H; the ids against the rows' T
    save_16(bad, (3, H + 2))
    expect_error(experts_run(bad, ids, wt, w1, w2), rb"w1\.npy: W1 rows have 8 columns, but H is 10 \(\S*bad\.npy\)")
    save_16(bad, (5, H))
    expect_error(experts_run(bad, ids, wt, w1, w2), rb"ids\.npy: 3 tokens, but \S*bad\.npy has 5 rows")


@case
def experts_dtypes_disagree_with_hidden(w):
    h, ids, wt, w1, w2 = experts_files(w)  # float16 rows and weights
    bf = os.path.join(w, "bf.npy")
    save_16(bf, (E_SMALL, 2 * I_SMALL, H_SMALL), descr="|V2")  # bfloat16 as ml_dtypes saves it
    expect_error(experts_run(h, ids, wt, bf, w2), rb"bf\.npy: W1 are bfloat16, the hidden states float16")
    save_16(bf, (E_SMALL, H_SMALL, I_SMALL), descr="|V2")
    expect_error(experts_run(h, ids, wt, w1, bf), rb"bf\.npy: W2 are bfloat16, the hidden states float16")
    f32 = os.path.join(w, "f32.npy")
    save_f32(f32, [0.0] * (E_SMALL * 2 * I_SMALL * H_SMALL), (E_SMALL, 2 * I_SMALL, H_SMALL))
    expect_error(experts_run(h, ids, wt, f32, w2), rb"f32\.npy: W1 must be bfloat16 or float16, got float32")
    save_16(f32, (3, H_SMALL), descr="<i2")
    expect_error(experts_run(f32, ids, wt, w1, w2), rb"f32\.npy: hidden states must be bfloat16 or float16, got int16")
    # generated rows (bf16 by default) against float16 weights
    expect_error(experts_run(None, None, None, w1, w2, "--tokens", 2, "--topk", 1),
                 rb"w1\.npy: W1 are float16, the hidden states bfloat16")
    save_f32(f32, [0.5] * 6, (3, 2))
    save_i32(bf, [0] * 6, (3, 2))
    expect_error(experts_run(h, ids, bf, w1, w2), rb"bf\.npy: the weights must be float32 \[3, 2\]")
    expect_error(experts_run(h, f32, wt, w1, w2), rb"f32\.npy: expert ids must be int32 or int64 \[T, K\], got float32")


@case
def experts_dropped_ids_contribute_nothing(w):
    # -1, E and beyond, and int64 ids beyond int32 are dropped slots (exit 0).
    # Two formulations agree: a dropped slot adds what a slot of weight 0 adds
    # (nothing), and a token with every slot dropped has an all-zero row.
    h, _, _, w1, w2 = experts_files(w, tokens=4)
    ids, ids0, wt, wt0 = (os.path.join(w, n) for n in ("d.npy", "z.npy", "dw.npy", "zw.npy"))
    with open(ids, "wb") as f:
        f.write(npy_bytes("<i8", "(4, 2)", struct.pack("<8q", 1, -1, 2, 4, -1, -1, 3, 2**40)))
    save_f32(wt, [0.5, 0.25, 0.5, 0.75, 1.0, 1.0, 0.5, 0.5], (4, 2))
    save_i32(ids0, [1, 0, 2, 0, 0, 1, 3, 0], (4, 2))  # the dropped slots as weight-0 slots
    save_f32(wt0, [0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.5, 0.0], (4, 2))
    outs = []
    for i, (ii, ww) in enumerate(((ids, wt), (ids0, wt0))):
        o = os.path.join(w, f"o{i}")
        rc, out, err = experts_run(h, ii, ww, w1, w2, "--out", o)
        expect(rc == 0, f"exit {rc}: {err!r}")
        outs.append(load_f16_rows(os.path.join(o, "out.npy")))
        if i == 0:
            expect(b"5 of 8 slots dropped" in out, f"no note of the dropped slots: {out!r}")
    expect(outs[0] == outs[1], f"dropped slots differ from weight-0 slots: {outs[0]} vs {outs[1]}")
    expect(all(v == 0.0 for v in outs[0][2]), f"a token with every slot dropped: {outs[0][2]}")
    expect(any(v != 0.0 for v in outs[0][0]), f"token 0 has a kept slot but an all-zero row: {outs[0][0]}")


@case
def experts_non_finite_inputs(w):
    h, ids, wt, w1, w2 = experts_files(w)
    bad = os.path.join(w, "bad.npy")
    o = os.path.join(w, "o")
    v = [F16_ONE] * (3 * H_SMALL)
    v[11] = 0x7E00  # NaN
    save_16(bad, (3, H_SMALL), v)
    expect_error(experts_run(bad, ids, wt, w1, w2, "--out", o),
                 rb"bad\.npy: hidden\[1, 3\] is nan: rows must be finite")
    v = [F16_ONE] * (E_SMALL * 2 * I_SMALL * H_SMALL)
    v[100] = 0x7C00  # +inf
    save_16(bad, (E_SMALL, 2 * I_SMALL, H_SMALL), v)
    expect_error(experts_run(h, ids, wt, bad, w2, "--out", o), rb"bad\.npy: element 100 is inf: weights must be finite")
    v = [F16_ONE] * (E_SMALL * H_SMALL * I_SMALL)
    v[-1] = 0xFC00  # -inf
    save_16(bad, (E_SMALL, H_SMALL, I_SMALL), v)
    expect_error(experts_run(h, ids, wt, w1, bad, "--out", o),
                 rb"bad\.npy: element 191 is -inf: weights must be finite")
    save_f32(bad, [0.5, 0.5, float("inf"), 0.5, 0.5, 0.5], (3, 2))
    expect_error(experts_run(h, ids, bad, w1, w2, "--out", o),
                 rb"bad\.npy: weight \[1, 0\] is inf: weights must be finite")
    expect(not os.path.exists(o), "an output folder was made for a refused input")


@case
def experts_truncated_inputs(w):
    files = experts_files(w)
    for i, f in enumerate(files):
        with open(f, "rb") as fh:
            body = fh.read()
        cut = os.path.join(w, "cut.npy")
        with open(cut, "wb") as fh:
            fh.write(body[:-1])
        args = list(files)
        args[i] = cut
        expect_error(experts_run(*args),
                     rb"cut\.npy: truncated: shape \(.*\) of \w+ needs \d+ data bytes, the file has \d+$")
        with open(cut, "wb") as fh:
            fh.write(body[:20])  # inside the header
        expect_error(experts_run(*args), rb"cut\.npy: ")


@case
def experts_cpu_limit_refuses_big_models_quickly(w):
    # DeepSeek-V3 at a million tokens on the CPU: refused by the multiply-add
    # limit before anything T-long is made (a 1 GB cap shows an allocation).
    for family in (["experts"], ["moe-path", "--experts", "ffn"]):
        t = time.monotonic()
        expect_error(run(*family, "--model", "deepseek-v3", "--tokens", 1000000, "--device", "cpu",
                         "--out", os.path.join(w, "o"), timeout=20, preexec_fn=capped(1)),
                     rb"(multiply-adds|needs about [\d.]+ GB of host memory)")
        expect(time.monotonic() - t < 5, f"{family[0]}: refused only after {time.monotonic() - t:.1f} s")
    expect_error(run("experts", "--model", "deepseek-v3", "--tokens", 1000000, "--device", "cpu", timeout=20,
                     preexec_fn=capped(1)), rb"a CPU run computes every token: .* 3\.52e\+14 multiply-adds is over")
    expect(not os.path.exists(os.path.join(w, "o")), "an output folder was made")


@case
def experts_bad_size_options(w):
    gen = ["--tokens", 2, "-E", 4, "--topk", 2, "--hidden-size", 8, "--inter-size", 4, "--device", "cpu"]

    def with_(**kw):
        a = list(gen)
        for k, v in kw.items():
            a[a.index("--" + k.replace("_", "-")) + 1] = v
        return a
    for family in (["experts"], ["moe-path", "--experts", "ffn"]):
        ex = lambda *a: run(*family, *a, timeout=20, preexec_fn=capped(1))  # noqa: E731
        expect_error(ex(*with_(tokens=-1)), rb"--tokens N")
        expect_error(ex(*with_(inter_size=0)), rb"--inter-size must be >= 1, got 0$")
        expect_error(ex(*with_(hidden_size=0)), rb"--hidden-size must be >= 1, got 0$")
        expect_error(ex(*with_(hidden_size=-5)), rb"--hidden-size must be >= 1, got -5$")
        # 2 * I * H = 2^64 wrapped to 0 and passed the per-expert limit
        for tokens, hs, inter in ((2, 2**32, 2**31), (0, 2**32, 2**31), (0, 2**30, 2**33), (0, 1, 2**62)):
            expect_error(ex(*with_(tokens=tokens, hidden_size=hs, inter_size=inter)),
                         rb"(2 \* I \* H must be below 2\^31 elements per expert|elements of hidden rows is too large)")
        expect_error(ex(*gen, "--act", "swiglu-oai"), rb"--act swiglu-oai takes W1 with interleaved gate/up rows")
        expect_error(ex(*gen, "--act", "swiglu-oai", "--w1-layout", "gate-up"),
                     rb"--act swiglu-oai takes W1 with interleaved gate/up rows")
        rc, out, err = ex(*gen, "--act", "swiglu-oai", "--w1-layout", "interleaved")
        expect(rc == 0, f"{family[0]}: swiglu-oai with interleaved rows: exit {rc}: {err!r}")
    ex = lambda *a: run("experts", *a, timeout=20, preexec_fn=capped(1))  # noqa: E731
    expect_error(ex(*with_(tokens=2**40)), rb"elements of hidden rows is too large")
    expect_error(ex(*with_(topk=0)), rb"--topk must be >= 1, got 0$")
    expect_error(ex("--tokens", 2, "-E", 0, "--topk", 2, "--hidden-size", 8, "--inter-size", 4, "--device", "cpu"),
                 rb"-E must be >= 1, got 0$")
    expect_error(ex(*with_(topk=5)), rb"--topk 5 is more than the 4 experts")
    # generated weights: the reference makes one expert's W1 and W2 (6.4 GB
    # here); counted, so refused up front (it died "out of host memory")
    expect_error(ex("--tokens", 4, "-E", 4, "--topk", 2, "--hidden-size", 65536, "--inter-size", 16383,
                    "--device", "cpu"), rb"this experts run needs about 6\.\d GB of host memory")



@case
def moe_path_ffn_bad_weights(w):
    # moe-path --experts ffn reads the same W1/W2: refused by header, naming the file.
    h, ids, wt, w1, w2 = experts_files(w, tokens=3)
    base = ["moe-path", "--experts", "ffn", "--hidden", h, "--topk-ids", ids, "--topk-weights", wt, "-E", E_SMALL,
            "--device", "cpu"]
    mp = lambda a, b: run(*base, "--w1", a, "--w2", b, timeout=20, preexec_fn=capped(1))  # noqa: E731
    rc, _, err = mp(w1, w2)
    expect(rc == 0, f"the valid set: exit {rc}: {err!r}")
    bad = os.path.join(w, "bad.npy")
    save_16(bad, (E_SMALL, H_SMALL, I_SMALL + 1))
    expect_error(mp(w1, bad), rb"bad\.npy: W2 must be \[E, H, I\] = \[4, 8, 6\]")
    save_16(bad, (E_SMALL + 1, 2 * I_SMALL, H_SMALL))
    expect_error(mp(bad, w2), rb"bad\.npy: W1 must be \[E, 2I, H\] = \[4, 2I, 8\]")
    save_16(bad, (E_SMALL, 2 * I_SMALL, H_SMALL), descr="|V2")
    expect_error(mp(bad, w2), rb"bad\.npy: the expert weights must be float16 like the hidden states, got bfloat16")
    v = [F16_ONE] * (E_SMALL * H_SMALL * I_SMALL)
    v[-1] = 0x7C00
    save_16(bad, (E_SMALL, H_SMALL, I_SMALL), v)
    expect_error(mp(w1, bad), rb"bad\.npy: element \[3, 7, 5\] is inf: expert weights must be finite")
    with open(w2, "rb") as fh:
        body = fh.read()
    with open(bad, "wb") as fh:
        fh.write(body[:-1])
    expect_error(mp(w1, bad), rb"bad\.npy: truncated")
    sparse_npy(bad, "<f2", (E_SMALL, H_SMALL, 2**30), 2)  # a W2 header of 64 GB (a hole)
    expect_error(mp(w1, bad), rb"bad\.npy: W2 must be")
    # Headers that agree but claim sizes past a limit: the refusal names both files
    # (it said only "2 * I * H must be below 2^31" or "needs about 1.6 GB").
    gen = ["moe-path", "--experts", "ffn", "-E", "4", "-k", "2", "--tokens", "2", "--gen-dtype", "f16", "--device", "cpu"]
    b1, b2 = os.path.join(w, "b1.npy"), os.path.join(w, "b2.npy")
    sparse_npy(b1, "<f2", (4, 2 * 65536, 65536), 2)
    sparse_npy(b2, "<f2", (4, 65536, 65536), 2)
    expect_error(run(*gen, "--hidden-size", "65536", "--w1", b1, "--w2", b2, timeout=20, preexec_fn=capped(1)),
                 rb"2 \* I \* H must be below 2\^31.*\(sizes from .*b1\.npy \(4, 131072, 65536\), .*b2\.npy")
    sparse_npy(b1, "<f2", (4, 2 * 8192, 8192), 2)
    sparse_npy(b2, "<f2", (4, 8192, 8192), 2)
    expect_error(run(*gen, "--hidden-size", "8192", "--w1", b1, "--w2", b2, timeout=20, preexec_fn=capped(1)),
                 rb"host memory.*\(sizes from .*b1\.npy \(4, 16384, 8192\), .*b2\.npy")

@case
def in_experts_inputs_fifo(w):
    h, ids, wt, w1, w2 = experts_files(w)
    m = os.path.join(w, "m.npy")
    save_i32(m, [0, 1, 2, 3])
    fifo = os.path.join(w, "f.npy")
    full = ["--hidden", h, "--topk-ids", ids, "--topk-weights", wt, "--w1", w1, "--w2", w2, "--expert-map", m]
    for i in range(1, len(full), 2):
        if os.path.exists(fifo):
            os.remove(fifo)
        fifo_input(w)
        args = list(full)
        args[i] = fifo
        input_refused(w, ["experts", *args, "--device", "cpu"])

@case
def text_readers_never_echo_raw_bytes(w):
    # nlohmann quotes the bytes it stopped at ("last read: '...'"): it writes
    # controls below 0x20 as <U+001B>, but DEL and invalid UTF-8 went to the
    # terminal raw (found by fuzz_readers).
    f = os.path.join(w, "x.json")
    with open(f, "wb") as fh:
        fh.write(b'[[[1, \x1b[2J]]]\n')
    for args in (["trace", "import", "json", f, "-o", os.path.join(w, "o")],
                 ["trace", "import", "jsonl", f, "-o", os.path.join(w, "o")],
                 ["compare", f, f], ["plot", f, "-o", os.path.join(w, "p.svg")]):
        expect_error(run(*args), rb"x\.json:1: .*syntax error")
    with open(f, "wb") as fh:
        fh.write(b'\xef\xbb\x7f\x00[1]\n')  # a broken byte-order mark, then NUL
    expect_error(run("trace", "import", "json", f, "-o", os.path.join(w, "o")), rb"x\.json:1: .*invalid BOM")
    expect_error(run("compare", f, f), rb"x\.json:1: .*invalid BOM")


def main(argv):
    global MOEKIT
    if argv[1:] == ["--list"]:
        missing = [n for n in npy_corpus.names() if not n.startswith("ok_") and n not in CORPUS_MESSAGES]
        if missing:
            print(f"corpus cases without an expected message: {missing}", file=sys.stderr)
            return 1
        print("\n".join(CASES))
        return 0
    if len(argv) != 4 or argv[3] not in CASES:
        print(__doc__, file=sys.stderr)
        return 2
    MOEKIT, root, name = argv[1], argv[2], argv[3]
    w = os.path.join(root, name)
    if os.path.lexists(w):
        for dirpath, dirnames, _ in os.walk(w):  # read-only leftovers of a failed run
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), 0o755)
        shutil.rmtree(w)
    os.makedirs(w)
    try:
        CASES[name](w)
    except Skip as e:
        print(f"SKIP {name}: {e}")
        return SKIP
    except Fail as e:
        print(f"FAIL {name}: {e}")
        return 1
    print(f"ok   {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
