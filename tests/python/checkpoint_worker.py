"""dcp.save under one layout, dtensor.torch.checkpoint.load under another (gloo, CPU processes).

    checkpoint_worker.py save DIR WORLD        every dtype, uneven shapes, FSDP2+TP on a 2x2 mesh (world 4)
    checkpoint_worker.py load DIR WORLD CASE   CASE: tp2 (1-d mesh of 2, a _StridedShard target among
                                               others), rtp (2x2: TP on 2 replicated over 2), fsdp4
Each loading rank prints "rank R: N tensors equal" after comparing every local shard bit for bit with
the saved tensor's elements it should hold (from dtensor's ownership, not from the load)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]
SHAPES = [(10, 6), (7, 5), (9,), (3, 8), (0, 4), (5, 1)]


def full(i: int, dtype, shape):
    n = 1
    for s in shape:
        n *= s
    v = torch.arange(n, dtype=torch.float64).reshape(shape) + 3 * i
    if dtype == torch.bool:
        return (v.long() % 3 == 0)
    if dtype.is_floating_point and dtype.itemsize == 1:
        return (v % 16 / 4).to(dtype)  # exact in fp8
    return (v % 100).to(dtype)


def tensors():
    out = []
    for i, dt in enumerate(DTYPES):
        out.append((f"t{i}.{str(dt).split('.')[-1]}", dt, SHAPES[i % len(SHAPES)]))
    out.append(("big.f32", torch.float32, (33, 17)))
    return out


def run(rank: int, world: int, mode: str, path: str, case: str) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard
    import torch.distributed.checkpoint as dcp
    if mode == "save":
        mesh = init_device_mesh("cpu", (2, 2))
        sd = {}
        for i, (name, dt, shape) in enumerate(tensors()):
            pl = [Shard(0), Shard(len(shape) - 1)] if i % 2 == 0 else [Shard(0), Shard(0)]
            sd[name] = distribute_tensor(full(i, dt, shape), mesh, pl, src_data_rank=None)
        dcp.save(sd, checkpoint_id=path)
        print(f"rank {rank}: saved", flush=True)
    else:
        import dtensor.torch as dt_
        import dtensor.torch.checkpoint as dck
        if case == "tp2":
            mesh = init_device_mesh("cpu", (2,))
            options = [[_StridedShard(0, split_factor=2)], [Shard(0)], [Replicate()], [Shard(-1)]]
        elif case == "rtp":
            mesh = init_device_mesh("cpu", (2, 2))
            options = [[Replicate(), Shard(-1)], [Replicate(), Shard(0)], [Shard(0), Replicate()]]
        else:
            mesh = init_device_mesh("cpu", (4,))
            options = [[Shard(0)], [_StridedShard(0, split_factor=2)], [Shard(-1)]]
        sd, want = {}, {}
        for i, (name, dt, shape) in enumerate(tensors()):
            pl = [Shard(p.dim % len(shape)) if type(p) is Shard else p for p in options[i % len(options)]]
            if any(isinstance(p, _StridedShard) for p in pl) and shape[0] < 4:
                pl = [Shard(0) for _ in pl]
            x = distribute_tensor(torch.zeros(shape, dtype=dt), mesh, pl, src_data_rank=None)
            # garbage in the target, so that every element must be written
            x._local_tensor.view(torch.uint8).fill_(0xA5)
            sd[name] = x
            layout = dt_.layout_of(x)
            runs = layout.owned_runs(dist.get_rank())
            index = [torch.tensor([g for a, b in r for g in range(a, b)], dtype=torch.long) for r in runs]
            f = full(i, dt, shape)
            want[name] = f[tuple(ix.view([-1 if d == k else 1 for d in range(len(index))]) for k, ix in enumerate(index))]
        plan = dck.load(sd, checkpoint_id=path)
        equal = sum(torch.equal(sd[n]._local_tensor.contiguous().view(torch.uint8), want[n].contiguous().view(torch.uint8))
                    for n in sd)
        print(f"rank {rank}: {equal} of {len(sd)} tensors equal; read {plan.total_read_bytes} bytes, busiest "
              f"{plan.busiest_read_bytes}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    mode, path, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    case = sys.argv[4] if len(sys.argv) > 4 else ""
    mp.start_processes(run, args=(world, mode, path, case), nprocs=world, join=True, start_method="spawn")
