"""torch's distribute_tensor against the layout rules, on random layouts with _StridedShard (uneven
shapes, shard orders): every rank's local tensor compared with dtensor.torch.distribute's (which
follows torch's compute_local_shape_and_global_offset). Prints counts per outcome and examples;
docs/torch-defects.md quotes its output.

    torchrun --nproc-per-node 4 scripts/torch_distribute_check.py [--cases 300] [--seed 1]

Both of distribute_tensor's modes run: src_data_rank=None (every rank splits locally, no
communication) and the default src_data_rank=0 (rank 0 splits, then a scatter). A case where some
ranks raise and others wait in the scatter times out (gloo timeout 10 s) and is counted as a hang;
the check then stops (the group is no longer usable)."""
import argparse
import datetime
import os
import random
from collections import Counter

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard

import dtensor.torch as dt


def random_layout(rng, mesh_ndim, tensor_ndim):
    pl = []
    for _ in range(mesh_ndim):
        r = rng.random()
        d = rng.randrange(tensor_ndim)
        if r < 0.2:
            pl.append(Replicate())
        elif r < 0.55:
            pl.append(Shard(d))
        else:
            pl.append(_StridedShard(d, split_factor=rng.choice([2, 3, 4])))
    return pl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
    world, rank = dist.get_world_size(), dist.get_rank()
    shapes = {4: [(4,), (2, 2)], 8: [(8,), (2, 4), (2, 2, 2)]}.get(world, [(world,)])
    meshes = {s: init_device_mesh("cpu", s) for s in shapes}
    rng = random.Random(args.seed)
    counts = {"None": Counter(), "0": Counter()}
    examples = {"None": {}, "0": {}}
    checked = 0
    for case in range(args.cases):
        ms = rng.choice(shapes)
        mesh = meshes[ms]
        nd = rng.choice([1, 2])
        shape = tuple(rng.choice([1, 2, 3, 5, 7, 8, 12, 13]) for _ in range(nd))
        pl = random_layout(rng, len(ms), nd)
        if not any(isinstance(p, _StridedShard) for p in pl):
            continue
        g = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
        try:
            want = dt.distribute(g, mesh, pl).to_local()
        except ValueError:
            continue  # a layout dtensor (and torch's rules) refuse
        name = f"{'x'.join(map(str, ms))} {'x'.join(map(str, shape))} {pl}"
        checked += 1
        for mode in ("None", "0"):
            try:
                got = distribute_tensor(g, mesh, pl, src_data_rank=None if mode == "None" else 0).to_local()
                outcome = "right" if got.shape == want.shape and torch.equal(got, want) else "wrong"
                detail = "" if outcome == "right" else f"rank {rank}: {got.flatten().tolist()[:8]} expected {want.flatten().tolist()[:8]}"
            except Exception as e:  # noqa: BLE001
                text = " ".join(str(e).split())[:140]
                outcome = "hang" if "imed out" in text or "Connection" in text else f"raised {type(e).__name__}"
                detail = f"rank {rank}: {text}"
            outs = [None] * world
            dist.all_gather_object(outs, (outcome, detail))
            worst = sorted({o for o, _ in outs}, key=lambda o: (o == "right", o))[0]
            counts[mode][worst] += 1
            if worst != "right":
                examples[mode].setdefault(worst, (name, next(d for o, d in outs if o == worst)))
            if worst == "hang":
                break
        if counts["0"]["hang"]:
            break
    if rank == 0:
        print(f"torch {torch.__version__}, world {world}: {checked} layouts with _StridedShard")
        for mode in ("None", "0"):
            print(f"  src_data_rank={mode}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts[mode].items())))
            for k, (name, d) in sorted(examples[mode].items()):
                print(f"    {k}: {name}: {d}")
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
