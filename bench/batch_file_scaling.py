"""`dtensor plan --batch FILE`, end to end (read, plan, print), against the number of pairs: wall
time and peak RSS of the CLI process, per pair, for the text and the `--format json` output;
ratios to the smallest file's figures from the same run. docs/batch.md has the table.

    python3 bench/batch_file_scaling.py [--cli build/dtensor] [--pairs 10000,100000,1000000]

Each file holds N identical pairs in compact JSON (`{"shape":[64,32],"dtype":"bf16","from":
"S(0)S(1)","to":"RS(1)"}` on a 2x4 mesh, about 64 bytes a pair: 1M pairs is 61 MiB, under the
reader's 64 MiB cap), written to a temporary directory; the output goes to /dev/null. Peak RSS is
the process's own (wait4's ru_maxrss). One run per case: each is seconds long. The target: per
pair, time and RSS at the largest file within 1.5x of those at the smallest.
"""
import argparse
import os
import subprocess
import tempfile
import time

PAIR = '{"shape":[64,32],"dtype":"bf16","from":"S(0)S(1)","to":"RS(1)"}'


def write(path, n):
    with open(path, "w") as f:
        f.write('{"version":1,"mesh":[2,4],"pairs":[')
        f.write(",".join([PAIR] * n))
        f.write("]}")


def run(cmd):
    """(wall seconds, peak RSS bytes) of one command, its output discarded; raises on failure."""
    with open(os.devnull, "w") as null:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {err.strip()[:300]}")
    return wall, usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default="build/dtensor")
    ap.add_argument("--pairs", default="10000,100000,1000000")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.pairs.split(",")]
    except ValueError:
        ap.error(f"--pairs: expected comma-separated integers, got {a.pairs!r}")
    if not sizes or any(n < 1 or n > 1 << 20 for n in sizes):
        ap.error(f"--pairs: each count must be in [1, 1048576], got {a.pairs!r}")
    if not os.access(a.cli, os.X_OK):
        ap.error(f"--cli: {a.cli!r} is not an executable (build it first: cmake --build build --target dtensor_cli)")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            path = os.path.join(d, f"batch{n}.json")
            write(path, n)
            mib = os.path.getsize(path) / 2**20
            for fmt in ("text", "json"):
                wall, rss = run([a.cli, "plan", "--batch", path, "--format", fmt])
                rows.append((n, fmt, mib, wall, rss))
            os.remove(path)
    base = {fmt: (w / n, r / n) for n, fmt, _, w, r in rows if n == sizes[0]}
    print(f"{'pairs':>9} {'format':6} {'file MiB':>8} {'wall s':>8} {'peak RSS MiB':>12} {'us/pair':>8} "
          f"{'KiB/pair':>8} {'time/pair ratio':>15} {'RSS/pair ratio':>14}")
    for n, fmt, mib, wall, rss in rows:
        tp, rp = wall / n, rss / n
        print(f"{n:>9} {fmt:6} {mib:>8.1f} {wall:>8.2f} {rss / 2**20:>12.1f} {tp * 1e6:>8.2f} {rp / 1024:>8.2f} "
              f"{tp / base[fmt][0]:>15.2f} {rp / base[fmt][1]:>14.2f}")


if __name__ == "__main__":
    main()
