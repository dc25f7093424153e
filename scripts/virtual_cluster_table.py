#!/usr/bin/env python3
"""The model-against-simulation table of docs/virtual-cluster.md, from `dtensor tune validate
--format json` reports run under scripts/smpi-run.sh (scripts/virtual-cluster.sh writes them).

    python3 scripts/virtual_cluster_table.py RANKS:PROFILE:REPORT.json [...]

Per report and plan class (the case's name without its size): the median absolute prediction
error over every plan run (|predicted / simulated - 1|), the chosen plan's regret (its simulated
time over the fastest candidate's, minus one) at its median and worst, and the worst regret over
the cases whose two best predictions differ by more than 10% (where the model claims a choice).
"""
import json
import re
import statistics
import sys


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def plan_class(name):
    return re.sub(r"\s+\d+(\.\d+)?\s*(B|KiB|MiB|GiB)$", "", name)


def rows(ranks, profile, path):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list):
        fail(f"{path}: not a tune validate report (no cases)")
    classes = {}
    for case in report["cases"]:
        plans = [p for p in case.get("plans", []) if p.get("median_us", 0) > 0]
        if case.get("skipped") or not plans:
            continue
        c = classes.setdefault(plan_class(case["name"]), {"errors": [], "regrets": [], "decisive": []})
        c["errors"] += [abs(p["predicted_us"] / p["median_us"] - 1) for p in plans]
        c["regrets"].append(case.get("regret", 0.0))
        preds = sorted(p["predicted_us"] for p in plans)
        if len(preds) > 1 and preds[1] > 1.10 * preds[0]:
            c["decisive"].append(case.get("regret", 0.0))
    out = []
    for name, c in classes.items():
        out.append((ranks, profile, name, len(c["regrets"]), statistics.median(c["errors"]),
                    statistics.median(c["regrets"]), max(c["regrets"]),
                    max(c["decisive"]) if c["decisive"] else None, report.get("clock", "")))
    return out


def main(argv):
    if not argv:
        fail("give RANKS:PROFILE:REPORT.json arguments")
    table = []
    clocks = set()
    for arg in argv:
        parts = arg.split(":", 2)
        if len(parts) != 3 or not parts[0].isdigit():
            fail(f"{arg!r} is not RANKS:PROFILE:REPORT.json")
        for r in rows(int(parts[0]), parts[1], parts[2]):
            table.append(r[:-1])
            clocks.add(r[-1])
    print("| ranks | profile | plan class | cases | median abs error | median regret | worst regret | worst regret, decisive cases |")
    print("|---|---|---|---|---|---|---|---|")
    for ranks, profile, name, n, err, reg, worst, dec in table:
        d = "n/a" if dec is None else f"{100 * dec:.1f}%"
        print(f"| {ranks} | {profile} | {name} | {n} | {100 * err:.1f}% | {100 * reg:.1f}% | {100 * worst:.1f}% | {d} |")
    for c in sorted(clocks):
        print(f"\nclock: {c}")


if __name__ == "__main__":
    main(sys.argv[1:])
