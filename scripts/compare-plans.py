#!/usr/bin/env python3
"""Plans the same random requests with two builds of the dtensor CLI and compares the outputs
byte for byte (a refactor must not change any plan, cost or refusal).

  scripts/compare-plans.py OLD/dtensor NEW/dtensor [--count 400] [--seed 7] [--cross-mesh | --batch | --load | --ragged]
                           [--max-memory] [--profile FILE]
  scripts/compare-plans.py OLD/python NEW/python --owners [--count 400] [--seed 7]

--cross-mesh plans cross-mesh requests instead (a second mesh, identical, overlapping or disjoint
world ranks); --batch plans batch files of 2-6 pairs on one mesh (`plan --batch`); --load plans
checkpoint load requests (`load-plan --request`: 1-5 tensors whose saved chunks tile them on a
random grid, targets Shard/StridedShard/Replicate, a random fan-out); --ragged plans requests
from or to RaggedShard layouts (uneven units, zeros, a sharded or replicated mesh dim beside the
ragged one); --owners compares dtensor.plan_owners through the Python API instead: OLD and NEW are
Python interpreters, each importing its own dtensor package (e.g. a script that runs
`PYTHONPATH=/tmp/old-wheel exec /opt/dtensor-venv/bin/python "$@"`), on random sets of 1-24 tensors
(uneven and empty shards, Shard/StridedShard/Replicate, the owner mesh dim at random, compute
times or none, the default or PyTorch model); every owner, load and makespan compared bit for bit
(float repr), errors included; --max-memory
gives every request a random workspace budget (`--max-memory`, 4 KiB to 64 MiB: some plans
change, some requests are refused with the smallest budget that admits a plan); --profile FILE
plans every request with that cost-model profile (e.g. a fitted one: `bench_planner
--write-fitted FILE`) instead of a random choice of the default and PyTorch models; --meshes
draws from other meshes (e.g. with interchangeable mesh dims); --replicated-targets draws targets
whose mesh dims are mostly R or P(sum); --free-tensor-dims draws shapes that end in two or three
dims of one length after a dim longer than the mesh has ranks, and placements that shard only the
dims before them (interchangeable tensor dims, docs/planner.md), and with --mixed-lengths draws
each of those dims' lengths apart.

Prints the number of requests planned and one digest per CLI; exits 1 when they differ, naming
the first request whose outputs differ. With --costs a difference is accepted when every
total_cost_us (plan and runner-up) is the same and refusals are identical: for a change that may
choose another of several equal-cost plans (docs/planner.md); it counts them."""
import argparse
import hashlib
import re
import json
import os
import random
import subprocess
import sys
import tempfile

MESHES = ["4", "2x4", "2x2x2", "3x2", "8", "2x3x2", "4x4"]


def placements(rng, mesh_ndim, tensor_ndim):
    out = ""
    for _ in range(mesh_ndim):
        k = rng.randint(0, 5)
        if k == 0:
            out += "R"
        elif k == 1:
            out += "P(%s)" % rng.choice(["sum", "avg", "max"])
        elif k <= 4:
            out += "S(%d)" % rng.randint(0, tensor_ndim - 1)
        else:
            out += "_S(%d,2)" % rng.randint(0, tensor_ndim - 1)
    return out


def target_placements(rng, mesh_ndim, tensor_ndim, mostly_replicated):
    """The target's placements; with `mostly_replicated` two of three mesh dims are R or P(sum)
    (so that mesh dims of one size often trade places without changing the target)."""
    if not mostly_replicated:
        return placements(rng, mesh_ndim, tensor_ndim)
    return "".join(rng.choice(["R", "R", "P(sum)", "S(%d)" % rng.randint(0, tensor_ndim - 1)]) for _ in range(mesh_ndim))


def ranks_of(mesh):
    n = 1
    for x in mesh.split("x"):
        n *= int(x)
    return n


def batch_request(rng, folder, k):
    mesh = rng.choice(MESHES)
    nm = mesh.count("x") + 1
    pairs = []
    for _ in range(rng.randint(2, 6)):
        nd = rng.randint(1, 3)
        shape = [rng.choice([1, 3, 7, 8, 16, 64, 100, 1024]) for _ in range(nd)]
        pairs.append({"shape": shape, "dtype": rng.choice(["f32", "bf16"]), "from": placements(rng, nm, nd),
                      "to": placements(rng, nm, nd)})
    path = os.path.join(folder, f"batch{k}.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "mesh": [int(x) for x in mesh.split("x")], "pairs": pairs}, f)
    return ["plan", "--batch", path]


def free_dims_request(rng, mixed=False):
    """A request whose trailing tensor dims (one length) neither end shards, after a leading dim
    longer than the mesh has ranks: the planner merges them (interchangeable tensor dims). With
    `mixed`, each trailing dim's length is drawn apart (multiples of the rank count, which the
    planner merges across lengths, and others)."""
    mesh = rng.choice(MESHES)
    nm, ranks = mesh.count("x") + 1, ranks_of(mesh)
    lead = rng.choice([2 * ranks + 1, 8 * ranks, 4096])
    free = rng.choice([2, 3])
    if mixed:
        tail = [rng.choice([ranks, 2 * ranks, 8 * ranks, 1024, 64, 3]) for _ in range(free)]
    else:
        tail = [rng.choice([3, 8, 16, 64])] * free
    shape = [lead] + ([rng.choice([lead, 100])] if rng.random() < 0.5 else []) + tail
    fixed = len(shape) - free  # the dims placements may shard
    return ["plan", "--mesh", mesh, "--shape", "x".join(map(str, shape)), "--from", placements(rng, nm, fixed),
            "--to", placements(rng, nm, fixed)]


def load_request(rng, folder, k):
    """A checkpoint load request: tensors whose saved chunks tile them on a random grid (per dim,
    random cut points), loaded into random Shard/StridedShard/Replicate targets on one mesh."""
    mesh = rng.choice(MESHES)
    nm = mesh.count("x") + 1
    tensors = []
    for t in range(rng.randint(1, 5)):
        nd = rng.randint(1, 3)
        shape = [rng.choice([1, 3, 7, 8, 16, 64, 100]) for _ in range(nd)]
        cuts = []
        for z in shape:
            inner = sorted(rng.sample(range(1, z), min(z - 1, rng.randint(0, 4)))) if z > 1 else []
            cuts.append([0] + inner + [z])
        chunks = []

        def grid(d, offsets, sizes):
            if d == nd:
                chunks.append([list(offsets), list(sizes)])
                return
            for a, b in zip(cuts[d], cuts[d][1:]):
                grid(d + 1, offsets + [a], sizes + [b - a])
        grid(0, [], [])
        pl = "".join(rng.choice(["R", "R", "S(%d)" % rng.randint(0, nd - 1), "_S(%d,2)" % rng.randint(0, nd - 1)])
                     for _ in range(nm))
        tensors.append({"name": f"t{t}", "layout": {"mesh": [int(x) for x in mesh.split("x")], "shape": shape,
                        "dtype": rng.choice(["f32", "bf16"]), "placements": pl}, "chunks": chunks})
    path = os.path.join(folder, f"load{k}.json")
    with open(path, "w") as f:
        json.dump({"tensors": tensors}, f)
    return ["load-plan", "--request", path, "--fanout", rng.choice(["cheapest", "cheapest", "direct", "gather"])]


def ragged_placements(rng, mesh):
    """RaggedShard on one mesh dim (the dims before it Replicate), dims (0,) or (0, 1), and units
    0-3 (not all zero); the mesh dims after it R or S(last dim)."""
    sizes = [int(x) for x in mesh.split("x")]
    m = rng.randrange(len(sizes))
    units = [rng.randint(0, 3) for _ in range(sizes[m])]
    if sum(units) == 0:
        units[rng.randrange(len(units))] = 1
    dims = rng.choice(["(0,)", "(0,1)"])
    out = "R" * m + "RaggedShard(%s,(%s))" % (dims, ",".join(map(str, units)))
    out += "".join(rng.choice(["R", "S(2)"]) for _ in range(len(sizes) - m - 1))
    return out, sum(units)


def ragged_request(rng):
    """A plan from or to a ragged layout; the rows a multiple of every ragged side's units' sum
    (so most requests are valid layouts, and the rest are refused alike)."""
    import math
    mesh = rng.choice(["4", "2x4", "3x2", "8", "2x2x2", "2x3"])
    nm = mesh.count("x") + 1
    src, total = ragged_placements(rng, mesh)
    if rng.random() < 0.5:
        dst, other = ragged_placements(rng, mesh)
        total = math.lcm(total, other)
    else:
        dst = "".join(rng.choice(["R", "S(0)", "S(1)", "S(2)"]) for _ in range(nm))
    shape = [total * rng.randint(1, 3), rng.choice([1, 2, 3]), rng.choice([4, 8, 6])]
    if rng.random() < 0.5:
        src, dst = dst, src
    return ["plan", "--mesh", mesh, "--shape", "x".join(map(str, shape)), "--from", src, "--to", dst]


def requests(count, seed, cross_mesh, batch, max_memory, folder, profile=None, mostly_replicated=False, free_dims=False,
             mixed_lengths=False, load=False, ragged=False):
    rng = random.Random(seed)
    for k in range(count):
        if load:
            args = load_request(rng, folder, k)
        elif ragged:
            args = ragged_request(rng)
        elif batch:
            args = batch_request(rng, folder, k)
        elif free_dims:
            args = free_dims_request(rng, mixed_lengths)
        else:
            args = single_request(rng, cross_mesh, mostly_replicated)
        if max_memory:
            args += ["--max-memory", str(rng.choice([1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 26]))]
        model = rng.choice(["default", "pytorch"])  # drawn either way: --profile keeps the same requests
        yield args + ["--cost-model", profile or model, "--format", "json"]


def single_request(rng, cross_mesh, mostly_replicated=False):
    mesh = rng.choice(MESHES)
    nm, nd = mesh.count("x") + 1, rng.randint(1, 3)
    shape = "x".join(str(rng.choice([1, 3, 7, 8, 16, 64, 100, 1024])) for _ in range(nd))
    args = ["plan", "--mesh", mesh, "--shape", shape, "--from", placements(rng, nm, nd)]
    if cross_mesh:
        to_mesh = rng.choice(MESHES)
        n, m = ranks_of(mesh), ranks_of(to_mesh)
        start = rng.choice([0, n // 2, n])  # overlapping from rank 0, from the middle, or disjoint
        to_ranks = list(range(start, start + m))
        if rng.random() < 0.3:
            rng.shuffle(to_ranks)
        args += ["--to-mesh", to_mesh, "--to-ranks", ",".join(map(str, to_ranks)),
                 "--to", placements(rng, to_mesh.count("x") + 1, nd).replace("P(avg)", "R")]
    else:
        args += ["--to", target_placements(rng, nm, nd, mostly_replicated)]
    return args


def costs_of(text):
    """Every total_cost_us in a JSON output, depth first (None when the output is not JSON)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    out = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "total_cost_us":
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return out


def same_costs(a, b):
    """Both outputs plan at the same costs (equal-cost ties may differ), or both refuse alike."""
    ca, cb = costs_of(a[1]), costs_of(b[1])
    if ca is None or cb is None or a[0] != b[0]:
        return a == b
    return len(ca) == len(cb) and all(abs(x - y) <= 1e-6 + 1e-12 * abs(x) for x, y in zip(ca, cb))


OWNERS_SCRIPT = r"""
import json, sys
import dtensor
for line in sys.stdin:
    q = json.loads(line)
    try:
        mesh = dtensor.Mesh(q["mesh"])
        ls = [dtensor.Layout(mesh, shape, pl, "bf16") for shape, pl in q["tensors"]]
        p = dtensor.plan_owners(ls, q["mesh_dim"], q["compute_us"], q["cost_model"])
        out = [list(p.owners), [repr(x) for x in p.load_us], repr(p.makespan_us), p.exact, p.nodes]
    except Exception as e:  # (compared like a result)
        out = ["error", type(e).__name__, str(e)]
    print(json.dumps(out), flush=True)
"""


def owner_requests(rng, count):
    """Random plan_owners requests, one JSON line each."""
    for _ in range(count):
        mesh = rng.choice(MESHES)
        nd = mesh.count("x") + 1
        n = rng.choice([1, 2, 3, 5, 8, 12, 13, 17, 24])
        mesh_dim = rng.randint(0, nd - 1)
        tensors = []
        for _ in range(n):
            tnd = rng.randint(1, 3)
            shape = [rng.choice([1, 3, 5, 8, 13, 16, 31, 64]) for _ in range(tnd)]
            pl = ""
            for m in range(nd):
                # (mesh dims before the owners' are mostly R: the owner layout's RaggedShard comes first)
                k = 0 if m < mesh_dim and rng.random() < 0.9 else rng.randint(0, 4)
                pl += "R" if k == 0 else "_S(%d,2)" % rng.randint(0, tnd - 1) if k == 4 else "S(%d)" % rng.randint(0, tnd - 1)
            tensors.append([shape, pl])
        compute = [round(rng.uniform(0, 50), 3) for _ in range(n)] if rng.random() < 0.4 else None
        yield json.dumps({"mesh": mesh, "tensors": tensors, "mesh_dim": mesh_dim, "compute_us": compute,
                          "cost_model": rng.choice(["default", "pytorch"])})


def compare_owners(a):
    """--owners: the same requests through both interpreters' dtensor.plan_owners, line by line."""
    lines = list(owner_requests(random.Random(a.seed), a.count))
    outs = []
    for py in (a.old, a.new):
        r = subprocess.run([py, "-c", OWNERS_SCRIPT], input="\n".join(lines) + "\n", capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{py} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        outs.append(r.stdout.splitlines())
    for q, x, y in zip(lines, outs[0], outs[1]):
        if x != y:
            print(f"differ: plan_owners {q}\n  old: {x[:300]}\n  new: {y[:300]}", file=sys.stderr)
            return 1
    if len(outs[0]) != len(lines) or len(outs[1]) != len(lines):
        print(f"answers: {len(outs[0])} and {len(outs[1])} for {len(lines)} requests", file=sys.stderr)
        return 1
    planned = sum(1 for x in outs[1] if not x.startswith('["error"'))
    d = [hashlib.sha256("\n".join(o).encode()).hexdigest() for o in outs]
    print(f"{a.count} requests, {planned} planned, identical outputs: {d[0]} {d[1]}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cross-mesh", action="store_true")
    ap.add_argument("--batch", action="store_true")
    ap.add_argument("--load", action="store_true", help="checkpoint load requests (load-plan --request)")
    ap.add_argument("--ragged", action="store_true", help="requests from or to RaggedShard layouts")
    ap.add_argument("--owners", action="store_true",
                    help="dtensor.plan_owners through the Python API: OLD and NEW are Python interpreters")
    ap.add_argument("--max-memory", action="store_true")
    ap.add_argument("--profile", help="a cost-model profile (JSON) for every request")
    ap.add_argument("--costs", action="store_true",
                    help="accept outputs that differ only in which equal-cost plan or runner-up they chose "
                         "(every total_cost_us the same, refusals identical); count them")
    ap.add_argument("--replicated-targets", action="store_true",
                    help="single-mesh targets with two of three mesh dims R or P(sum)")
    ap.add_argument("--free-tensor-dims", action="store_true",
                    help="single-mesh requests with trailing tensor dims of one length that neither end shards")
    ap.add_argument("--mixed-lengths", action="store_true",
                    help="with --free-tensor-dims: the trailing dims' lengths drawn apart")
    ap.add_argument("--meshes", help="comma-separated meshes to draw from instead of the default list "
                                     "(e.g. 2x2x2x2,2x2x4x8,4x4x8: interchangeable mesh dims)")
    a = ap.parse_args()
    if a.count < 1:
        ap.error(f"--count {a.count} must be positive")
    if a.replicated_targets and (a.cross_mesh or a.batch):
        ap.error("--replicated-targets is for single-mesh requests")
    if a.free_tensor_dims and (a.cross_mesh or a.batch or a.replicated_targets):
        ap.error("--free-tensor-dims is for single-mesh requests with random targets")
    if a.mixed_lengths and not a.free_tensor_dims:
        ap.error("--mixed-lengths goes with --free-tensor-dims")
    if sum([a.cross_mesh, a.batch, a.load, a.ragged, a.owners, a.free_tensor_dims, a.replicated_targets]) > 1:
        ap.error("--cross-mesh, --batch, --load, --ragged, --owners, --free-tensor-dims and --replicated-targets do not "
                 "combine")
    if a.owners:
        if a.max_memory or a.profile or a.costs or a.meshes:
            ap.error("--owners takes --count and --seed only")
        return compare_owners(a)
    if a.max_memory and (a.load or a.ragged):
        ap.error("--max-memory is for plan requests, not --load or --ragged")
    if a.meshes:
        for m in a.meshes.split(","):
            if not re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)*", m):
                ap.error(f"--meshes: {m!r} is not a mesh like 2x4")
        MESHES[:] = a.meshes.split(",")
    digests = [hashlib.sha256(), hashlib.sha256()]
    planned = ties = 0
    folder = tempfile.TemporaryDirectory()
    for args in requests(a.count, a.seed, a.cross_mesh, a.batch, a.max_memory, folder.name, a.profile,
                         a.replicated_targets, a.free_tensor_dims, a.mixed_lengths, a.load, a.ragged):
        outs = []
        for cli, d in zip((a.old, a.new), digests):
            r = subprocess.run([cli] + args, capture_output=True, text=True)
            text = r.stdout + r.stderr + str(r.returncode)
            d.update(text.encode())
            outs.append((r.returncode, r.stdout if a.costs and r.returncode == 0 else text))
        if outs[0][1] != outs[1][1]:
            if not (a.costs and same_costs(outs[0], outs[1])):
                print("differ: dtensor " + " ".join(args), file=sys.stderr)
                return 1
            ties += 1
        planned += outs[1][0] == 0
    if a.costs:
        print(f"{a.count} requests, {planned} planned, same costs; {ties} chose another plan or runner-up of equal cost")
    else:
        print(f"{a.count} requests, {planned} planned, identical outputs: {digests[0].hexdigest()} {digests[1].hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
