"""Ranks of test_checkpoint_save_mp.py: dtensor.torch.checkpoint.save of strided and shard-order
DTensors (every dtype) on 4 ranks, loaded back on 2 and 3 ranks by dcp.load (Shard/Replicate
targets, plain tensors) and by dtensor.torch.checkpoint.load (any target), every element checked.
    python save_worker.py save DIR 4 | load DIR 2|3 | refusals DIR 4 | dcp DIR 4"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))
from checkpoint_worker import DTYPES, full, say  # noqa: E402


def entries():
    """(name, dtype, shape, placements on the 2x2 save mesh, shard order or None, boxed?)"""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    try:
        from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
    except ImportError:
        ShardOrderEntry = None
    out = []
    kinds = [([_StridedShard(0, split_factor=3), Shard(0)], (25, 3), None),
             ([_StridedShard(0, split_factor=3), Shard(0)], (9, 3), None),
             ([_StridedShard(0, split_factor=4), Shard(0)], (25, 2), None),
             ([Shard(1), _StridedShard(0, split_factor=3)], (11, 4), None)]
    for i, dt in enumerate(DTYPES):
        pl, shape, _ = kinds[i % len(kinds)]
        out.append((f"s{i}.{str(dt).split('.')[-1]}", dt, shape, pl, None, True))
    if ShardOrderEntry is not None:  # S(0) twice, mesh dim 1 first: torch 2.12+
        order = (ShardOrderEntry(tensor_dim=0, mesh_dims=(1, 0)),)
        out.append(("order.f32", torch.float32, (10, 3), [Shard(0), Shard(0)], order, None))
        out.append(("order.bf16", torch.bfloat16, (7, 5), [Shard(0), Shard(0)], order, None))
    # DCP describes these right: its default path, unchanged
    out.append(("plainshard.f32", torch.float32, (9, 6), [Shard(0), Shard(1)], None, False))
    out.append(("repl.i64", torch.int64, (5, 2), [Replicate(), Shard(0)], None, False))
    out.append(("strided_even.f32", torch.float32, (8, 3), [_StridedShard(0, split_factor=2), Shard(0)], None, False))
    return out


def run(rank, world, mode, path):
    try:
        _run(rank, world, mode, path)
    except BaseException:
        import traceback
        say(f"rank {rank}: failed: " + traceback.format_exc().replace("\n", " | "))
        os._exit(1)


def _run(rank, world, mode, path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard
    import dtensor.torch as dt
    import dtensor.torch.checkpoint as dck

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    if mode in ("save", "dcp", "refusals"):
        mesh = init_device_mesh("cpu", (2, 2))
        sd = {}
        for i, (name, dtype, shape, pl, order, _) in enumerate(entries()):
            sd[name] = dt.distribute(full(i, dtype, shape), mesh, pl, shard_order=order)
        sd["plain"] = torch.arange(5.0)
        sd["meta"] = {"epoch": 7}
        if mode == "save":
            md = dck.save(sd, checkpoint_id=path)
            # the same through users' own dcp.save: which entries were written as boxes
            planner = dck.SavePlanner()
            dcp.save(sd, checkpoint_id=path + "-own", planner=planner)
            every = [None] * world
            dist.all_gather_object(every, planner.boxed)  # (a rank whose shard is one box uses DCP's path)
            anywhere = {n for b in every for n in b}
            for name, _, _, _, _, boxed in entries():
                if boxed is not None:
                    assert (name in anywhere) == boxed, (rank, name, sorted(anywhere))
            chunks = sum(len(md.state_dict_metadata[n].chunks) for n, *_ in entries())
            say(f"rank {rank}: saved, {len(anywhere)} entries as boxes, {chunks} chunks")
        elif mode == "dcp":  # torch's own save of the same entries (the defects docs/torch-defects.md records)
            try:
                dcp.save({"w": sd["s0.float32"]}, checkpoint_id=path)
                say(f"rank {rank}: dcp.save strided: saved")
            except BaseException as e:  # (a CheckpointException is a BaseException)
                say(f"rank {rank}: dcp.save strided: {type(e).__name__}: ...{' '.join(str(e).split())[-400:]}")
            try:
                from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
            except ImportError:
                ShardOrderEntry = None
            if ShardOrderEntry is not None:
                f = torch.arange(24.0).reshape(8, 3)
                order = (ShardOrderEntry(tensor_dim=0, mesh_dims=(1, 0)),)
                for how, saver in (("dcp.save", dcp.save), ("dtensor save", dck.save)):
                    x = dt.distribute(f, mesh, [Shard(0), Shard(0)], shard_order=order)
                    saver({"o": x}, checkpoint_id=f"{path}-{how.replace(' ', '-')}")
                    back = {"o": distribute_tensor(torch.zeros(8, 3), mesh, [Replicate(), Replicate()])}
                    dcp.load(back, checkpoint_id=f"{path}-{how.replace(' ', '-')}")
                    say(f"rank {rank}: {how} order: loaded equal {torch.equal(back['o'].to_local(), f)}")
        else:
            # a non-tensor value under a DTensor's key on one rank: every rank refused, naming it
            bad = dict(sd)
            if rank == 2:
                bad["s1.bfloat16"] = 5
            try:
                dck.save(bad, checkpoint_id=path)
                say(f"rank {rank}: saved a disagreeing state dict")
            except ValueError as e:
                say(f"rank {rank}: refused: {e}")
            # a process group that leaves out ranks of a DTensor's mesh
            sub = dist.new_group([0, 1])
            if rank in (0, 1):
                try:
                    dck.save({"w": sd["s0.float32"]}, checkpoint_id=path + "-sub", process_group=sub)
                    say(f"rank {rank}: saved on a subgroup")
                except ValueError as e:
                    say(f"rank {rank}: refused: {e}")
            try:
                dck.save([], checkpoint_id=path)
            except TypeError as e:
                say(f"rank {rank}: refused: {e}")
    else:
        mesh = init_device_mesh("cpu", (world,))
        names = entries()
        # dcp.load: Shard and Replicate targets and plain tensors
        sd = {}
        for i, (name, dtype, shape, *_ ) in enumerate(names):
            pl = [Shard(0)] if i % 3 == 0 else [Replicate()] if i % 3 == 1 else None
            z = torch.zeros(shape, dtype=dtype)
            z.view(torch.uint8).fill_(0xA5) if z.numel() else None
            sd[name] = distribute_tensor(z, mesh, pl, src_data_rank=None) if pl else z
        dcp.load(sd, checkpoint_id=path)
        def want(i, dtype, shape, x):
            f = full(i, dtype, shape)
            return dt.distribute(f, mesh, x.placements).to_local() if hasattr(x, "to_local") else f

        def bits(t):
            return t.contiguous().view(torch.uint8)

        wrong = [name for i, (name, dtype, shape, *_) in enumerate(names)
                 if not torch.equal(bits(sd[name].to_local() if hasattr(sd[name], "to_local") else sd[name]),
                                    bits(want(i, dtype, shape, sd[name])))]
        # dtensor.torch.checkpoint.load: strided targets too
        sd2 = {}
        for i, (name, dtype, shape, *_ ) in enumerate(names):
            pl = [_StridedShard(0, split_factor=2)] if i % 2 == 0 and shape[0] >= 4 else [Shard(len(shape) - 1)]
            sd2[name] = dt.distribute(torch.zeros(shape, dtype=dtype), mesh, pl)
        dck.load(sd2, checkpoint_id=path)
        for i, (name, dtype, shape, *_) in enumerate(names):
            if not torch.equal(bits(sd2[name].to_local()), bits(want(i, dtype, shape, sd2[name]))):
                wrong.append(name + " (dtensor load)")
        say(f"rank {rank}: loaded {2 * len(names)}, wrong {wrong}")
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    mode, path, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = mp.start_processes(run, args=(world, mode, path), nprocs=world, join=False, start_method="spawn")
    for p in ctx.processes:
        p.join(150)
    sys.exit(max(abs(p.exitcode or 0) for p in ctx.processes))
