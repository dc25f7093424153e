"""Real multi-process runs: torch.multiprocessing spawns world 4 and world 8 on gloo (CPU) and
runs seeded random src -> dst pairs through dtensor.torch.redistribute (tests/python/mp_worker.py).
Every rank's result must equal the expected shard of an arange tensor. Where torch's own
redistribute disagrees with the expected shard it is recorded in the report, not failed."""
import json
import math
import os
import random

import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from layouts import random_spec  # noqa: E402
from procs import free_port  # noqa: E402
from mp_worker import torch_api_takes  # noqa: E402

PERMUTED = {4: [2, 0, 3, 1], 8: [5, 2, 7, 0, 3, 6, 1, 4]}
REPORT = os.environ.get("DTENSOR_TORCH_DEFECTS_REPORT")  # where to write torch's wrong results (optional)
# torch's own redistribute on the same pairs is a report (docs/torch-defects.md), never a check: it
# runs when the report is asked for, or with DTENSOR_TORCH_COMPARE=1 (about 4 minutes of the CI
# run otherwise, most of it waiting out torch's hangs at world 8)
TORCH_COMPARE = bool(REPORT) or os.environ.get("DTENSOR_TORCH_COMPARE") == "1"
# random pairs per world (scripts/python-test.sh runs 100 in CI; 160 by default)
PAIRS = int(os.environ.get("DTENSOR_REDISTRIBUTE_PAIRS", "160"))


def make_cases(seed, meshes, count):
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        mesh = rng.choice(meshes)
        src = random_spec(rng, mesh, sizes=(1, 3, 5, 8, 12), max_ndim=2)
        # same shape, and the same reduce op (dtensor and torch refuse other mixes)
        dst = random_spec(rng, mesh, shape=src.shape, op=src.partial_op())
        dtype = rng.choice(["f64", "f64", "f32", "i32"])
        if dtype == "i32" and "avg" in (src.partial_op(), dst.partial_op()):
            dtype = "f64"
        # a quarter of the pairs on a mesh whose ranks are not in row-major order (process groups
        # then order their members differently from the mesh)
        n = math.prod(mesh)
        ranks = list(range(n)) if rng.random() < 0.75 else rng.choice([list(reversed(range(n))), PERMUTED[n]])
        cases.append((mesh, ranks, src, dst, dtype))
    return cases


def spawn(world, args, timeout_s):
    """Runs mp_worker.run on `world` ranks: "" when they all finish, else why not."""
    import mp_worker
    return spawn_fn(mp_worker.run, world, args, timeout_s)


def spawn_fn(fn, world, args, timeout_s):
    """Runs fn(rank, world, port, *args) on `world` ranks: "" when they all finish, else why not."""
    import time
    ctx = mp.start_processes(fn, args=(world, free_port(), *args), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.time() + timeout_s
    try:
        while not ctx.join(timeout=2):
            if time.time() > deadline:
                raise TimeoutError(f"ranks did not finish within {timeout_s} s")
        return ""
    except Exception as e:  # noqa: BLE001: a rank raised, crashed or hung
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
        return str(e)[-3000:]


def torch_results(world, cases, out):
    """torch's own redistribute on every case: right / wrong / error / hang per case. A torch
    failure that leaves ranks waiting on each other stops the run; it restarts after that case."""
    start, seen = 0, {}
    while start < len(cases):
        spawn(world, (cases, str(out), "torch", start), 600)  # a torch failure is attributed below
        last = start - 1
        for r in range(world):
            path = out / f"rank{r}.jsonl"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                last = max(last, rec["case"])
                if rec["status"] != "begin":
                    seen.setdefault(rec["case"], {})[r] = rec
        # the first case not finished on every rank hung or crashed in torch
        stuck = next((i for i in range(start, len(cases)) if len(seen.get(i, {})) < world), len(cases))
        if stuck >= len(cases):
            break
        mesh, ranks, src, dst, dtype = cases[stuck]
        name = f"{src!r} -> {dst.text()} ({dtype})" + ("" if ranks == sorted(ranks) else f" mesh ranks {ranks}")
        seen[stuck] = {0: {"status": "hang", "name": name,
                           "detail": "ranks left waiting on each other (some raised, or a collective never matched)"}}
        for r in range(world):
            (out / f"rank{r}.jsonl").unlink(missing_ok=True)
        start = stuck + 1
    out_of = {}
    for i, recs in seen.items():
        statuses = {rec["status"] for rec in recs.values()}
        status = next((s for s in ("hang", "error", "wrong", "skipped") if s in statuses), "right")
        rec = next(r for r in recs.values() if r["status"] == status)
        grads = {r.get("grad") for r in recs.values()}
        grad = "wrong" if "wrong" in grads else ("right" if grads == {"right"} else None)
        out_of[i] = (status, rec.get("name", ""), rec.get("detail", ""), grad)
    return out_of


def run_world(world, meshes, count, seed, tmp_path, torch_copies):
    cases = make_cases(seed, meshes, count)
    out = tmp_path / f"world{world}"
    out.mkdir()
    why = spawn(world, (cases, str(out), "dtensor", 0, torch_copies), 300)
    if why:
        pytest.fail(f"world {world}: {why}")
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    return cases, results, out


# world 8 runs the executor's local copies as torch ops (the path GPU tensors take), world 4 in C++
@pytest.mark.parametrize("world,meshes,seed,torch_copies", [
    (4, [[4], [2, 2]], 11, False),
    (8, [[8], [2, 4], [4, 2], [2, 2, 2]], 12, True),
])
def test_redistribute_matches_expected_shards(world, meshes, seed, torch_copies, tmp_path):
    cases, results, out = run_world(world, meshes, PAIRS, seed, tmp_path, torch_copies)
    # earliest case first: a failure that breaks the process group fails every later case too
    wrong = sorted({w for r in results for w in r["wrong"]}, key=lambda w: (int(w.split(":")[0].split()[1]), w))
    assert all(r["checked"] == len(cases) for r in results)
    floats = [c for c in cases if c[4] != "i32"]
    assert all(r["grad_checked"] == len(floats) for r in results)
    # the gradient through y.to_local() (float pairs without a Partial target: every one with an
    # explicit target order, every 4th of the others)
    to_local = sum(1 for i, c in enumerate(cases)
                   if c[4] != "i32" and not c[3].partial_dims() and (c[3].explicit_order or i % 4 == 0))
    assert all(r["to_local_checked"] == to_local for r in results)
    assert all(r["enabled_checked"] == sum(1 for c in floats if not c[3].explicit_order and torch_api_takes(c[2], c[3]))
               for r in results)
    assert not wrong, f"{len(wrong)} of {len(cases)} pairs wrong:\n" + "\n".join(wrong[:10])
    dist_wrong = {}  # case -> (name, the first rank's difference)
    for r in sorted(results, key=lambda r: r["distribute_wrong"][0]["why"] if r["distribute_wrong"] else ""):
        for w in r["distribute_wrong"]:
            dist_wrong.setdefault(w["case"], (w["name"], w["why"]))
    print(f"\nworld {world}: torch's distribute_tensor gives the expected shard for {results[0]['distribute_checked'] - len(dist_wrong)}"
          f" of {results[0]['distribute_checked']} source layouts on every rank")
    if REPORT:
        with open(REPORT, "a") as f:
            for _, (name, why) in sorted(dist_wrong.items()):
                f.write(f"world {world} | distribute | {name} | {why}\n")
    # torch's own redistribute on the same pairs: recorded, never failed
    if not TORCH_COMPARE:
        return
    torch_out = torch_results(world, cases, out)
    counts, grads = {}, {}
    for status, _, _, grad in torch_out.values():
        counts[status] = counts.get(status, 0) + 1
        if grad is not None:
            k = f"forward {status}, gradient {grad}"
            grads[k] = grads.get(k, 0) + 1
    print(f"\nworld {world}: {len(cases)} pairs exact with dtensor.torch.redistribute, {results[0]['grad_checked']} "
          f"gradients exact, {results[0]['enabled_checked']} x.redistribute forward+backward exact under enabled(); "
          "torch's own redistribute: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + "; torch's gradients: " + ", ".join(f"{k} {v}" for k, v in sorted(grads.items())))
    if REPORT:
        with open(REPORT, "a") as f:
            for i in sorted(torch_out):
                status, name, detail, grad = torch_out[i]
                if status in ("wrong", "error", "hang"):
                    f.write(f"world {world} | {status} | {name} | {detail.splitlines()[0] if detail else ''}\n")
                elif grad == "wrong":
                    f.write(f"world {world} | gradient wrong | {name} | forward right\n")
