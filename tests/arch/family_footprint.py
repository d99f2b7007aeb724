#!/usr/bin/env python3
"""Issue #10's measure of a family being one unit: the files whose path does not
name the family but whose text does (outside docs/, data/, bench/results/ and README.md) must be
at most LIMIT per family. Prints them; exits 1 when a family has more.

Files of another family that name it count too, unless that family is listed in
USES as running it through its public interface (moe-path running route,
permute, experts and combine): those are listed as dependents. USES is the allowed
exception list; a family may only use families listed before it in families.txt.

Usage: family_footprint.py SOURCE_ROOT [--limit N]
"""
import os
import re
import subprocess
import sys

LIMIT = 3

# family -> the earlier families it runs through their public headers.
USES = {
    "route": {"align"},                                    # --then-align, block-rank-align
    "permute": {"align"},                                  # align's auto pick before the copies
    "combine": {"permute"},                                # reads permute's layouts
    "experts": {"align", "permute", "combine"},            # its layout and combine stages; generated routing
    "moe_path": {"align", "route", "permute", "combine", "experts"},  # its stages
    # each receiver's layout, the combine on the token's rank, generated routing, the expert FFN on each rank
    # (--experts ffn); a test that one rank is moe-path's result
    "ep": {"align", "permute", "combine", "experts", "moe_path"},
}


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"], capture_output=True,
                             text=True, check=True).stdout
        return [l for l in out.splitlines() if l]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build") and x != "bld"]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def main():
    root = sys.argv[1]
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else LIMIT
    with open(os.path.join(root, "families.txt")) as fh:
        families = [l.strip() for l in fh if l.strip() and not l.startswith("#")]
    files = [f for f in tracked_files(root)
             if not f.startswith(("docs/", "data/", "bench/results/")) and f != "README.md" and os.path.isfile(os.path.join(root, f))]
    for user, used in USES.items():  # the exceptions themselves: only earlier families
        for u in used:
            if families.index(u) >= families.index(user):
                print(f"FAIL: USES lets {user} name {u}, which is not listed before it in families.txt")
                return 1
    worst = 0
    for fam in families:
        spellings = {fam, fam.replace("_", "-")}
        # The name as code names it: a namespace (f::), a folder (f/, /f), a
        # quoted string ("f", 'f') that is not a key or a field's name (a JSON
        # key, a default, a report parameter: "experts" is E there, not the
        # family), a command line (moekit f) or a line of its own
        # (families.txt); not the English word in prose ("experts" is one, in
        # comments all over).
        alt = "(?:" + "|".join(map(re.escape, sorted(spellings))) + ")"
        word = re.compile(r"(?<![\w-])" + alt + r"(?=::|/)"
                          r"|(?<=/)" + alt + r"(?![\w-])"
                          r"|(?<=[\"'])" + alt + r"(?=[\"'](?!\s*[:;]|,\s*std::to_string))"
                          r"|(?<=moekit )" + alt + r"(?![\w-])|(?<=MOEKIT\) )" + alt + r"(?![\w-])"
                          r"|^" + alt + r"$", re.M)
        hits, dependents = [], []
        for f in files:
            if any(s in f for s in spellings) or f == "tests/arch/family_footprint.py":  # USES names them
                continue
            owner = next((o for o in families if o != fam and any(s in f.split("/") for s in {o, o.replace("_", "-")})),
                         None)
            if owner is not None and fam not in USES.get(owner, ()):
                owner = None  # a family naming one it does not use: counted
            try:
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    if word.search(fh.read()):
                        (dependents if owner else hits).append(f)
            except OSError:
                continue
        worst = max(worst, len(hits))
        print(f"{fam}: {len(hits)} file(s) outside its folders name it: {', '.join(hits) or '-'}"
              + (f"; used by: {', '.join(dependents)}" if dependents else ""))
    if worst > limit:
        print(f"FAIL: a family is named in more than {limit} files outside its own folders")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
