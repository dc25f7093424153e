#!/usr/bin/env python3
"""Pins torch 2.15's graph-planner costs for seeded random redistribution pairs, for the C++
fidelity test (tests/test_torch_costs.cpp): dtensor's `pytorch` cost model with the `pytorch`
edge set must find plans of exactly these costs.

    python3 scripts/pin_torch_costs.py --seed 7 --pairs 400 > tests/data/torch_costs.txt

Costs are torch's own: the sum, along the path torch's Dijkstra returns, of the transition
costs its search used (on GPU-like hosts of 8 devices, the host size dtensor's pytorch profile
assumes). Needs torch (pip install torch).
"""
import argparse, math, random, sys

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "bench"))
from torch_planner_compare import to_torch  # noqa: E402

MESHES = ["4", "8", "2x4", "4x2", "2x2x2", "2x4x4", "4x4x8", "2x2x2x2"]
SIZES = [1, 3, 8, 64, 1000, 4096]


def random_placements(rng, mesh_nd, tensor_nd, partial_ops):
    kinds, dims = [], {}
    for m in range(mesh_nd):
        r = rng.random()
        if r < 0.3 or tensor_nd == 0:
            kinds.append("R")
        elif r < 0.5:
            kinds.append(f"P({rng.choice(partial_ops)})")
        else:
            d = rng.randrange(tensor_nd)
            kinds.append(("S", d))
            dims.setdefault(d, []).append(m)
    # a random split order where a tensor dim is sharded by two or more mesh dims
    pos = {}
    for d, ms in dims.items():
        order = ms[:]
        if len(order) > 1 and rng.random() < 0.5:
            rng.shuffle(order)
        for k, m in enumerate(order):
            pos[m] = (k, order != ms)
    out = ""
    for m, k in enumerate(kinds):
        if k == "R" or isinstance(k, str):
            out += k
        else:
            kk, explicit = pos[m]
            out += f"S({k[1]})" + (f"[{kk}]" if explicit else "")
    return out


def graph_planner_cost(mesh, meta, src, dst):
    """The cost torch's graph planner finds from DTensorSpec `src` to `dst`: the sum, along the
    path its Dijkstra returns, of the transition costs its search used (planner cache cleared)."""
    from torch.distributed.tensor import _redistribute as R
    R.clear_redistribute_planner_cache()
    drp = R.get_redistribute_planner(mesh, meta)
    drp.partial_reduce_ops_in_target.update(p.reduce_op for p in (*src.placements, *dst.placements)
                                            if hasattr(p, "reduce_op"))
    a, b = drp.DistState(src.placements, src.shard_order), drp.DistState(dst.placements, dst.shard_order)
    path = drp.find_min_cost_path(a, b)
    cost = 0.0
    for x, y in zip(path, path[1:]):
        nxt = drp.get_next_state(x.placements, x.tensor_dim_to_mesh_dim)
        nxt.update(drp._get_shard_to_partial_target_states(x, b))
        cost += float(nxt[y])
    return cost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=400)
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import DeviceMesh, _mesh_resources
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor import _redistribute as R
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=128)
    _mesh_resources.num_devices_per_host = lambda device_type: 8
    rng = random.Random(args.seed)
    meshes = {}
    print(f"# torch {torch.__version__} graph-planner costs (us), bf16, hosts of 8 devices.")
    print(f"# Produced by: python3 scripts/pin_torch_costs.py --seed {args.seed} --pairs {args.pairs}")
    print("# MESH | SHAPE | FROM | TO | COST_US")
    done = 0
    while done < args.pairs:
        mesh_text = rng.choice(MESHES)
        dims = [int(x) for x in mesh_text.split("x")]
        if len(dims) == 4 and rng.random() < 0.7:
            continue  # torch's graph planner takes about a second per 4-d pair: fewer of them
        nd = rng.randint(1, 3)
        shape = [rng.choice(SIZES) for _ in range(nd)]
        # one reduce op per layout, or sum with avg (dtensor refuses other mixes, as documented)
        ops = rng.choice([["sum"], ["sum"], ["sum", "avg"], ["max"], ["avg"]])
        src_text = random_placements(rng, len(dims), nd, ops)
        dst_text = random_placements(rng, len(dims), nd, ops)
        if mesh_text not in meshes:
            meshes[mesh_text] = DeviceMesh("cpu", torch.arange(math.prod(dims)).reshape(dims))
        mesh = meshes[mesh_text]
        stride = [math.prod(shape[i + 1:]) for i in range(nd)]
        meta = TensorMeta(torch.Size(shape), tuple(stride), torch.bfloat16)
        try:
            specs = []
            for text in (src_text, dst_text):
                pl, so = to_torch(text, len(dims))
                specs.append(DTensorSpec(mesh, pl, tensor_meta=meta, shard_order=so, use_strided_shard_as_shard_order=False))
            cost = graph_planner_cost(mesh, meta, *specs)
        except Exception as e:  # torch refuses or fails on this pair: not pinned
            print(f"# skipped {mesh_text} | {'x'.join(map(str, shape))} | {src_text} | {dst_text}: {type(e).__name__}",
                  file=sys.stderr)
            continue
        if not math.isfinite(cost):
            continue
        print(f"{mesh_text} | {'x'.join(map(str, shape))} | {src_text} | {dst_text} | {cost!r}")
        done += 1


if __name__ == "__main__":
    main()
