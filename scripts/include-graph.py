#!/usr/bin/env python3
"""The include graph by floor: which floor's files include which floor's headers, and every
include that runs back up the floors (placement < planner < comm < sim < tune < viz < tools,
python). A public header include/dtensor/X.hpp belongs to the floor of the source X.cpp that
implements it (tune.hpp: tune); a header that only includes others (a deprecated forward) passes
its includes through; a public header with no source of its name is listed as unpaired.

  scripts/include-graph.py [ROOT]   (ROOT: a checkout, default this one)

Prints the floor-to-floor counts, the unpaired public headers, the upward includes and the
planner's private headers included by comm or sim; exits 1 when there is either. (comm and sim
sit above the planner and may use its public headers, include/dtensor/*.hpp; its private ones,
src/planner/*.hpp, are the planner's own: what comm or sim needs of them belongs in placement.) Reads the quoted #include lines of src/, include/, tools/ and
python/src/ (tests, benchmarks, examples and fuzz targets sit above every floor)."""
import os
import re
import sys

FLOORS = ["placement", "planner", "comm", "sim", "tune", "viz", "tools", "python"]
RANK = {f: i for i, f in enumerate(FLOORS)}
RANK["python"] = RANK["tools"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = []
    for top in ("src", "include", "tools", os.path.join("python", "src")):
        for d, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(d, n) for n in names if n.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh"))]
    files.sort()
    sources = {}
    for f in files:
        rel = os.path.relpath(f, root)
        if rel.startswith("src" + os.sep) and f.endswith((".cpp", ".cu")):
            sources.setdefault(os.path.splitext(os.path.basename(f))[0], rel.split(os.sep)[1])
    text = {f: open(f, encoding="utf-8", errors="replace").read() for f in files}

    def resolve(src, inc):
        for base in (os.path.dirname(src), os.path.join(root, "include"), os.path.join(root, "src")):
            p = os.path.normpath(os.path.join(base, inc))
            if p in text:
                return p
        return None

    def floor_of(f):
        rel = os.path.relpath(f, root).split(os.sep)
        if rel[0] == "src":
            return rel[1]
        if rel[0] == "tools":
            return "tools"
        if rel[0] == "python":
            return "python"
        name = os.path.splitext(rel[-1])[0]
        if name == "tune":
            return "tune"
        if name in sources:
            return sources[name]
        code = [l for l in text[f].splitlines() if l.strip() and not l.strip().startswith("//")]
        if all(l.startswith(("#pragma once", "#include")) for l in code):
            return "forward"
        return "unpaired"

    def targets(f, seen=()):
        """The files f's includes reach, forwards passed through."""
        for inc in INCLUDE.findall(text[f]):
            p = resolve(f, inc)
            if p is None or p in seen:
                continue
            if floor_of(p) == "forward":
                yield from targets(p, seen + (p,))
            else:
                yield p

    counts, upward, unpaired, private = {}, [], set(), []
    for f in files:
        a = floor_of(f)
        if a == "forward":
            continue
        if a == "unpaired":
            unpaired.add(os.path.relpath(f, root))
        for p in targets(f):
            b = floor_of(p)
            if b == "unpaired":
                unpaired.add(os.path.relpath(p, root))
            if a == b or a == "unpaired" or b == "unpaired":
                continue
            counts[(a, b)] = counts.get((a, b), 0) + 1
            if RANK[b] > RANK[a]:
                upward.append(f"{os.path.relpath(f, root)} ({a}) includes {os.path.relpath(p, root)} ({b})")
            rel_p = os.path.relpath(p, root).split(os.sep)
            if a in ("comm", "sim") and rel_p[:2] == ["src", "planner"] and p.endswith((".hpp", ".h")):
                private.append(f"{os.path.relpath(f, root)} ({a}) includes {os.path.relpath(p, root)}")
    print("includes between floors (from -> to: count):")
    for (a, b), n in sorted(counts.items(), key=lambda x: (RANK[x[0][0]], x[0][0], RANK[x[0][1]])):
        print(f"  {a:>9} -> {b:<9} {n:4d}{'   UP' if RANK[b] > RANK[a] else ''}")
    print(f"unpaired public headers ({len(unpaired)}):", " ".join(sorted(unpaired)) or "none")
    print(f"upward includes ({len(upward)}):")
    for u in sorted(set(upward)):
        print("  " + u)
    print(f"planner-private headers included by comm or sim ({len(set(private))}):")
    for u in sorted(set(private)):
        print("  " + u)
    return 1 if upward or private else 0


if __name__ == "__main__":
    sys.exit(main())
