"""torch alone (dtensor not imported): where the running torch loses a DTensor's explicit shard
order (docs/torch-defects.md, "Explicit shard orders"). One process, a fake process group of world
4, rank 0 of a 2x2 mesh; x is 8x3 f64 with placements [Shard(0), Shard(0)] and shard order
S(0)[1]S(0)[0] (and the same order beside a _StridedShard), built straight from a DTensorSpec.

    python scripts/torch_order_defects.py           # with any torch venv, e.g. /opt/dtensor-venv-2.11/bin/python

Prints, per case, the spec torch gives back and whether the local data is the same:
  unflatten  DTensor.__tensor_unflatten__(x.__tensor_flatten__()): what a compiled region sees of x
  detach     x.detach()
  .grad      x.backward(g) with g a DTensor in exactly x's spec, then x.grad (g's data expected)
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
from torch.distributed.tensor.placement_types import _StridedShard
from torch.testing._internal.distributed.fake_pg import FakeStore


def text(t, ref):
    s = t._spec
    order = None if s.shard_order is None else [(e.tensor_dim, tuple(e.mesh_dims)) for e in s.shard_order]
    same = t._local_tensor.shape == ref.shape and torch.equal(t._local_tensor, ref)
    return f"{list(s.placements)} order {order}, same local data: {same}"


def main():
    dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
    mesh = init_device_mesh("cpu", (2, 2))
    meta = TensorMeta(torch.Size([8, 3]), (3, 1), torch.float64)
    order = (ShardOrderEntry(tensor_dim=0, mesh_dims=(1, 0)),)
    local = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    print(f"torch {torch.__version__}")
    for name, placements, extra in (("S(0)[1]S(0)[0]", (Shard(0), Shard(0)), {}),
                                    ("_S(0,2)[1]S(0)[0]", (_StridedShard(0, split_factor=2), Shard(0)),
                                     {"use_strided_shard_as_shard_order": False})):
        spec = DTensorSpec(mesh, placements, tensor_meta=meta, shard_order=order, **extra)
        x = DTensor(local.clone(), spec, requires_grad=True)
        print(f"  x = {name}: {text(x, local)}")
        names, ctx = x.__tensor_flatten__()
        try:
            y = DTensor.__tensor_unflatten__({n: getattr(x, n) for n in names}, ctx, x.shape, x.stride())
            print(f"    unflatten  {text(y, local)}")
        except Exception as e:  # noqa: BLE001 - what torch raises is the finding
            print(f"    unflatten  raised {type(e).__name__}: {str(e).splitlines()[0][:100]}")
        try:
            print(f"    detach     {text(x.detach(), local)}")
            x.backward(DTensor(local + 100, spec, requires_grad=False))
            print(f"    .grad      {text(x.grad, local + 100)}")
        except Exception as e:  # noqa: BLE001
            print(f"    detach/.grad raised {type(e).__name__}: {str(e).splitlines()[0][:100]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
