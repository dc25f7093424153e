#!/usr/bin/env python3
"""Planning time against torch 2.15, side by side in one run, on the public case list.

Times torch's default planner (greedy; torch switches to its graph planner by itself for
shard orders and _StridedShard) and torch's graph planner (Dijkstra, `use_graph_based_transform`),
each with torch's planner cache cleared before every call, on a fake process group (CPU, no
devices). Runs `bench_planner --summary --json` for dtensor's own uncached times on the same
list, prints per-case times, the ratios, and whether dtensor's `pytorch` cost-model plan costs
what torch's graph-planner path costs (the sum of torch's own one-step costs along its path).

    python3 bench/torch_planner_compare.py [--bench build/bench/bench_planner] [--cases FILE]

Needs torch (pip install torch); prints a notice and exits 0 where torch is missing.
"""
import argparse, json, math, os, re, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def read_cases(path):
    cases = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        mesh, shape, src, dst = [f.strip() for f in line.split("|")]
        cases.append((mesh, shape, src, dst))
    return cases


TOKEN = re.compile(r"\s*(?:(_S)\((\d+),\s*(\d+)\)|S\((\d+)\)|(R)|P(?:\((\w+)\))?)(?:\[(\d+)\])?")


def to_torch(text, ndim_mesh):
    """dtensor placement text -> (torch placements, torch shard order)."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
    placements, order = [], {}
    pos = 0
    for m in range(ndim_mesh):
        t = TOKEN.match(text, pos)
        if not t:
            raise ValueError(f"cannot read {text!r} at {pos}")
        pos = t.end()
        strided, sd, sf, plain, rep, op, k = t.groups()
        if strided:
            placements.append(_StridedShard(int(sd), split_factor=int(sf)))
            d = int(sd)
        elif plain is not None:
            placements.append(Shard(int(plain)))
            d = int(plain)
        elif rep:
            placements.append(Replicate())
            continue
        else:
            placements.append(Partial(op or "sum"))
            continue
        order.setdefault(d, []).append((int(k) if k is not None else m, m))
    shard_order = tuple(ShardOrderEntry(d, tuple(m for _, m in sorted(v))) for d, v in sorted(order.items()))
    return tuple(placements), shard_order


def median_time_us(fn, budget_s=1.0, min_reps=3, max_reps=41):
    fn()  # warm-up
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget_s):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench", "bench_planner"))
    ap.add_argument("--cases", default=os.path.join(HERE, "planner_cases.txt"))
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch is not installed: nothing to compare (pip install torch)")
        return 0
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor import _redistribute as R

    cases = read_cases(args.cases)
    ours = json.loads(subprocess.run([args.bench, "--summary", args.cases, "--json"], check=True, capture_output=True,
                                     text=True).stdout)["cases"]
    assert len(ours) == len(cases)
    world = max(math.prod(int(x) for x in re.split(r"[x,]", re.sub(r"\w+=", "", c[0]))) for c in cases)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    # torch's cost model asks the device type how many devices a host has; a CPU mesh says 1,
    # which makes every mesh dim inter-host. dtensor's `pytorch` profile models torch on GPU
    # hosts of 8 devices: give torch the same host size.
    from torch.distributed.device_mesh import _mesh_resources
    _mesh_resources.num_devices_per_host = lambda device_type: 8
    meshes = {}
    rows = []
    for (mesh_text, shape_text, src_text, dst_text), our in zip(cases, ours):
        dims = [int(x) for x in re.split(r"[x,]", re.sub(r"\w+=", "", mesh_text))]
        if mesh_text not in meshes:
            meshes[mesh_text] = DeviceMesh("cpu", torch.arange(math.prod(dims)).reshape(dims))
        mesh = meshes[mesh_text]
        shape = [int(x) for x in shape_text.split("x")]
        stride = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        meta = TensorMeta(torch.Size(shape), tuple(stride), torch.bfloat16)
        specs = []
        for text in (src_text, dst_text):
            pl, so = to_torch(text, len(dims))
            specs.append(DTensorSpec(mesh, pl, tensor_meta=meta, shard_order=so, use_strided_shard_as_shard_order=False))
        src, dst = specs

        def run(graph):
            R.clear_redistribute_planner_cache()
            return R._gen_transform_infos_non_cached(src, dst, graph)

        t_default = median_time_us(lambda: run(False))
        t_graph = median_time_us(lambda: run(True))
        R.clear_redistribute_planner_cache()
        drp = R.get_redistribute_planner(mesh, meta)
        a, b = drp.DistState(src.placements, src.shard_order), drp.DistState(dst.placements, dst.shard_order)
        drp.partial_reduce_ops_in_target.update(p.reduce_op for p in (*src.placements, *dst.placements)
                                                if hasattr(p, "reduce_op"))
        path = drp.find_min_cost_path(a, b)
        torch_cost = 0.0
        for x, y in zip(path, path[1:]):  # each transition's cost as torch's search saw it
            nxt = drp.get_next_state(x.placements, x.tensor_dim_to_mesh_dim)
            nxt.update(drp._get_shard_to_partial_target_states(x, b))
            torch_cost += float(nxt[y])
        rows.append(dict(case=f"{mesh_text} {shape_text} {src_text} -> {dst_text}", ndim=len(dims), t_default=t_default,
                         t_graph=t_graph, t_ours=our["pytorch/pytorch_us"], cost_torch=torch_cost,
                         cost_ours=our["pytorch_cost_us"]))

    print(f"{'case':<62} {'torch default':>13} {'torch graph':>12} {'dtensor':>9} {'default/ours':>12} "
          f"{'graph/ours':>10}  cost torch / ours (us)")
    mismatches = 0
    for r in rows:
        same = abs(r["cost_torch"] - r["cost_ours"]) <= 1e-6 * max(1.0, abs(r["cost_torch"]))
        mismatches += not same
        print(f"{r['case']:<62} {r['t_default']:>13.1f} {r['t_graph']:>12.1f} {r['t_ours']:>9.1f} "
              f"{r['t_default'] / r['t_ours']:>12.2f} {r['t_graph'] / r['t_ours']:>10.2f}  "
              f"{r['cost_torch']:.3f} / {r['cost_ours']:.3f}{'' if same else '  DIFFERENT'}")
    print("\nper mesh-dim class (median us; geomean ratio torch/dtensor, above 1 = dtensor faster)")
    print(f"{'class':<6} {'torch default':>13} {'torch graph':>12} {'dtensor':>9} {'default/ours':>12} {'graph/ours':>10}")
    for d in sorted({r["ndim"] for r in rows}):
        rs = [r for r in rows if r["ndim"] == d]
        print(f"{d}-d    {statistics.median(r['t_default'] for r in rs):>13.1f} {statistics.median(r['t_graph'] for r in rs):>12.1f} "
              f"{statistics.median(r['t_ours'] for r in rs):>9.1f} {geomean([r['t_default'] / r['t_ours'] for r in rs]):>12.2f} "
              f"{geomean([r['t_graph'] / r['t_ours'] for r in rs]):>10.2f}")
    print(f"all    {'':>13} {'':>12} {'':>9} {geomean([r['t_default'] / r['t_ours'] for r in rows]):>12.2f} "
          f"{geomean([r['t_graph'] / r['t_ours'] for r in rows]):>10.2f}")
    print(f"\ncosts: {len(rows) - mismatches} of {len(rows)} pairs cost the same under dtensor's pytorch model and torch's graph planner")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
