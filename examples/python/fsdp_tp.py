"""FSDP + tensor parallelism: a weight stored sharded twice on dim 0 (tensor-parallel split first,
then FSDP's split of each TP piece) is gathered over the FSDP dim for compute, and its gradient,
a Partial sum over the data-parallel dim, is reduce-scattered back to the storage layout.
dtensor plans each redistribution (optimal under its cost model, the same on every rank) and runs
it as torch.distributed collectives.

    torchrun --nproc-per-node 4 examples/python/fsdp_tp.py          # CPU, gloo

Every rank checks its result against the expected shard of the global tensor.
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import ShardOrderEntry

import dtensor.torch as dt

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, dist.get_world_size() // 2), mesh_dim_names=("dp", "tp"))
rank = dist.get_rank()

# storage: dim 0 split over tp first, then each tp piece over dp (shard order tp, dp)
storage = [Shard(0), Shard(0)]
storage_order = (ShardOrderEntry(tensor_dim=0, mesh_dims=(1, 0)),)
weight = torch.arange(1000 * 512, dtype=torch.float32).reshape(1000, 512)
w = dt.distribute(weight, mesh, storage, shard_order=storage_order)

# compute layout: replicated over dp, column pieces over tp
compute = [Replicate(), Shard(0)]
w_full = dt.redistribute(w, compute)
if rank == 0:
    print(dt.plan_for(w, compute).explain())
expected = dt.distribute(weight, mesh, compute)
assert torch.equal(w_full.to_local(), expected.to_local()), f"rank {rank}: gathered weight differs"

# the gradient: a Partial sum over dp (each dp rank holds its micro-batch's part), tp-sharded
grad = 2 * weight
g = dt.distribute(grad, mesh, [Partial("sum"), Shard(0)])
g_stored = dt.redistribute(g, storage, shard_order=storage_order)
if rank == 0:
    print(dt.plan_for(g, storage, shard_order=storage_order).trace)
expected = dt.distribute(grad, mesh, storage, shard_order=storage_order)
assert torch.equal(g_stored.to_local(), expected.to_local()), f"rank {rank}: reduced gradient differs"

sys.stdout.write(f"rank {rank}: weight {list(w.to_local().shape)} -> {list(w_full.to_local().shape)}, "
                 f"gradient -> {list(g_stored.to_local().shape)}: ok\n")  # one write: ranks share the terminal
sys.stdout.flush()
dist.destroy_process_group()
