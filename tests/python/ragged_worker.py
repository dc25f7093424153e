"""One rank of test_ragged.py's multi-process check: every case's source piece (cut from an arange
tensor by the layout's own runs) through dtensor.torch.redistribute_local, compared with the
target's piece cut the same way; and dtensor.torch.distribute with a torch placement list that
holds a RaggedShard."""
import datetime
import json
import os

import torch
import torch.distributed as dist

from mp_worker import exit_now, mesh_maker


def piece(full: torch.Tensor, layout, coord) -> torch.Tensor:
    """The rank's local tensor of `layout` (a dtensor.RaggedLayout) cut from `full`."""
    if layout.is_ragged:
        flat = full.reshape(-1)
        runs = layout.owned_runs(coord)
        out = torch.cat([flat[a:b] for a, b in runs]) if runs else flat[:0]
        return out.reshape(layout.local_shape(coord))
    local = full
    for d, runs in enumerate(layout.base.owned_runs(coord)):
        idx = torch.cat([torch.arange(a, b) for a, b in runs]) if runs else torch.empty(0, dtype=torch.long)
        local = local.index_select(d, idx)
    return local.contiguous()


def run(rank, world, port, cases, out_dir):
    import dtensor
    import dtensor.torch as dt
    from torch.distributed.tensor import Replicate, Shard

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    mesh_of = mesh_maker()
    result = {"checked": 0, "wrong": [], "distribute_checked": 0}
    for mesh_shape, shape, src_text, dst_text, dtype in cases:
        mesh = mesh_of(mesh_shape, list(range(world)))
        info = dt._mesh_info(mesh)
        _, coord = info.my_coord()
        src = dtensor.RaggedLayout(info.mesh, shape, src_text, dtype)
        dst = dtensor.RaggedLayout(info.mesh, shape, dst_text, dtype)
        tdt = dt._FROM_DTYPE[dtype]
        full = torch.arange(max(1, torch.Size(shape).numel()), dtype=torch.float64)[: torch.Size(shape).numel()]
        full = full.reshape(shape).to(tdt)
        local = piece(full, src, coord)
        if src.is_ragged and rank % 2 == 1:
            local = local.reshape(-1)  # veScale's flat 1-D local is accepted too
        out = dt.redistribute_local(local, mesh, src, dst)
        want = piece(full, dst, coord)
        if out.shape != want.shape or not torch.equal(out, want):
            result["wrong"].append(f"{mesh_shape} {shape} {src_text} -> {dst_text} {dtype}")
        result["checked"] += 1
    # distribute with torch placements holding a RaggedShard
    mesh = mesh_of([world], list(range(world)))
    full = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
    units = tuple(range(1, world + 1)) if 8 % sum(range(1, world + 1)) == 0 else (2,) + (2,) * (world - 1)
    for placements in ([dt.RaggedShard((0,), units)], [dt.RaggedShard((0, 1), (1,) * world)], [Shard(0)], [Replicate()]):
        lay = dt.layout_of(mesh, placements, full.shape, full.dtype)
        got = dt.distribute(full, mesh, placements)
        got = got.to_local() if hasattr(got, "to_local") else got
        _, coord = dt._mesh_info(mesh).my_coord()
        want = piece(full, lay if isinstance(lay, dtensor.RaggedLayout) else dtensor.RaggedLayout(lay), coord)
        if not torch.equal(got, want):
            result["wrong"].append(f"distribute {placements}")
        result["distribute_checked"] += 1
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()
    exit_now()
