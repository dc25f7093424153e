"""The JSON readers beside the batch file's (docs/batch.md): each reader's time and peak RSS per item
at a small file and at its largest legal one, in the same run, with the ratio of the two.

    python3 bench/reader_scaling.py [--quick]      (the installed dtensor package; --quick: smaller)

Readers: load requests (`LoadRequest.from_json`, N one-row chunks of one tensor; the 256 MiB file
cap and 2^24 chunks bound it), load plans (`LoadPlan.from_json` of the plan of such a request),
ragged plans (`RaggedPlan.from_json`, which recomputes its exchange: a 1-d RaggedShard -> S(0) on N
ranks, up to the 4,096 ranks ragged plans take) and batch plans (`BatchPlan.from_json`, N pairs).
Each file is written first; one fresh process reads it (wall time of the read alone, the process's
peak RSS less an idle interpreter's). Target: per item, time and RSS at the largest within 1.5x of
those at the smallest.
"""
import argparse
import os
import subprocess
import sys
import tempfile

READ = """
import sys, time, dtensor
kind, path = sys.argv[1], sys.argv[2]
text = open(path).read()
t0 = time.perf_counter()
{"request": dtensor.LoadRequest.from_json, "plan": dtensor.LoadPlan.from_json,
 "ragged": dtensor.RaggedPlan.from_json, "batch": dtensor.BatchPlan.from_json, "idle": len}[kind](text)
print(time.perf_counter() - t0)
"""


def write_request(path, n):
    chunks = ",".join(f"[[{i},0],[1,4]]" for i in range(n))
    with open(path, "w") as f:
        f.write('{"tensors":[{"name":"w","layout":{"mesh":[2],"shape":[%d,4],"dtype":"f32","placements":"S(0)"},'
                '"chunks":[%s]}]}' % (n, chunks))


def write_plan(path, n, req_path):
    import dtensor
    req = dtensor.LoadRequest.from_json(open(req_path).read())
    with open(path, "w") as f:
        f.write(dtensor.plan_load(req.saved, req.targets).to_json())


def write_ragged(path, ranks):
    import dtensor
    mesh = dtensor.Mesh(str(ranks))
    units = ",".join("3" if r % 2 else "1" for r in range(ranks))
    src = dtensor.RaggedLayout(mesh, [2 * ranks, 64], f"RaggedShard((0,),({units}))", "bf16")
    dst = dtensor.RaggedLayout(mesh, [2 * ranks, 64], "S(0)", "bf16")
    with open(path, "w") as f:
        f.write(dtensor.plan_ragged(src, dst).to_json())


def write_batch(path, n):
    import dtensor
    mesh = dtensor.Mesh("2x4")
    pairs = [(dtensor.Layout(mesh, [64, 32], "S(0)S(1)", "bf16"), dtensor.Layout(mesh, [64, 32], "RS(1)", "bf16"))] * n
    with open(path, "w") as f:
        f.write(dtensor.plan_batch(pairs).to_json())


def read(kind, path):
    with open(os.devnull, "w") as null:
        p = subprocess.Popen([sys.executable, "-c", READ, kind, path], stdout=subprocess.PIPE, stderr=null, text=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"error: reading {kind} {path} failed")
    return float(out.strip()), usage.ru_maxrss * 1024


def write(kind, n, path):
    """Writes one file in a child process: this process stays small, so the readers' children
    (whose peak RSS counts what the process held before exec) start from an idle interpreter."""
    subprocess.run([sys.executable, __file__, "--write", kind, str(n), path], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write", nargs=3, metavar=("KIND", "N", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.write:
        kind, n, path = a.write[0], int(a.write[1]), a.write[2]
        if kind == "request":
            write_request(path, n)
        elif kind == "plan":
            write_request(path + ".req", n)
            write_plan(path, n, path + ".req")
            os.remove(path + ".req")
        elif kind == "ragged":
            write_ragged(path, n)
        else:
            write_batch(path, n)
        return
    sizes = {"request": (1 << 14, 1 << 19 if a.quick else 1 << 23), "plan": (1 << 14, 1 << 17 if a.quick else 1 << 20),
             "ragged": (64, 512 if a.quick else 4096), "batch": (1 << 10, 1 << 12 if a.quick else 1 << 15)}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        idle = os.path.join(d, "idle")
        open(idle, "w").write("{}")
        _, base_rss = read("idle", idle)
        for kind, ns in sizes.items():
            for n in ns:
                path = os.path.join(d, f"{kind}{n}.json")
                write(kind, n, path)
                mib = os.path.getsize(path) / 2**20
                wall, rss = read(kind, path)
                rows.append((kind, n, mib, wall, max(rss - base_rss, 1)))
                os.remove(path)
    print(f"{'reader':8} {'items':>8} {'file MiB':>9} {'read s':>8} {'RSS MiB':>8} {'us/item':>8} {'KiB/item':>9} "
          f"{'time/item ratio':>15} {'RSS/item ratio':>14}")
    first = {}
    for kind, n, mib, wall, rss in rows:
        tp, rp = wall / n, rss / n
        first.setdefault(kind, (tp, rp))
        print(f"{kind:8} {n:>8} {mib:>9.1f} {wall:>8.3f} {rss / 2**20:>8.1f} {tp * 1e6:>8.2f} {rp / 1024:>9.2f} "
              f"{tp / first[kind][0]:>15.2f} {rp / first[kind][1]:>14.2f}")


if __name__ == "__main__":
    main()
