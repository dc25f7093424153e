"""Local tensors of layouts torch cannot express (RaggedShard, single owners): redistributed by a
dtensor ragged plan over a DeviceMesh's process groups.

    import dtensor, dtensor.torch as dt
    src = dt.layout_of(mesh, [Shard(0)], w.shape, w.dtype)                  # FSDP-style rows
    own = dtensor.owner_layout(src, 0, owner)                               # one rank holds w
    full_or_empty = dt.redistribute_local(local, mesh, src, own)            # gather to the owner
    back = dt.redistribute_local(update, mesh, own, src)                    # scatter back
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh

from .. import _core
from .._ragged import RaggedShard  # noqa: F401 (dtensor.torch.RaggedShard)
from ._execution import _model_key, _recall, _remember, _runner
from ._layout import _dtype_name, _mesh_info

_plans: OrderedDict = OrderedDict()


def _as_ragged(layout, what: str) -> _core.RaggedLayout:
    if isinstance(layout, _core.RaggedLayout):
        return layout
    if isinstance(layout, _core.Layout):
        return _core.RaggedLayout(layout)
    raise TypeError(f"{what} must be a dtensor.Layout or dtensor.RaggedLayout, not {type(layout).__name__}")


def plan_local(src, dst, cost_model: Any = "default") -> _core.RaggedPlan:
    """The ragged plan redistribute_local runs (cached per layouts and cost model)."""
    a, b = _as_ragged(src, "src"), _as_ragged(dst, "dst")
    key = (str(a), str(b), _model_key(cost_model))
    plan = _recall(_plans, key) if key[2] is not None else None
    if plan is None:
        plan = _core.plan_ragged(a, b, cost_model)
        if key[2] is not None:
            _remember(_plans, key, plan, 1024)
    return plan


def redistribute_local(local: torch.Tensor, device_mesh: DeviceMesh, src, dst, *, cost_model: Any = "default") -> torch.Tensor:
    """This rank's local tensor of `dst` from its local tensor `local` of `src` (dtensor Layouts or
    RaggedLayouts of one mesh, shape and dtype; `device_mesh` the DeviceMesh they describe). A
    ragged local may be veScale's flat 1-D tensor or (rows, trailing extents...); the result has
    dst's local shape. Every rank of the mesh calls it with the same layouts (a collective). Not
    differentiable: it moves values (optimizer steps, checkpoints), not autograd graphs."""
    if not isinstance(local, torch.Tensor):
        raise TypeError(f"local must be a torch.Tensor, not {type(local).__name__}")
    a, b = _as_ragged(src, "src"), _as_ragged(dst, "dst")
    info = _mesh_info(device_mesh)
    if a.mesh != info.mesh:
        raise ValueError(f"the layouts' mesh {a.mesh} is not the device mesh {info.mesh}")
    _, coord = info.my_coord()
    if _dtype_name(local.dtype) != a.dtype:
        raise ValueError(f"local has dtype {local.dtype}; the source layout's is {a.dtype}")
    want = a.local_numel(coord)
    if local.numel() != want:
        raise ValueError(f"local has {local.numel()} elements; this rank's part of {a.placements_str} has {want} "
                         f"(shape {a.local_shape(coord)})")
    plan = plan_local(a, b, cost_model)
    runner = _runner(device_mesh, local.device)
    ex = runner._cached(("ragged", plan.hash, str(a), str(b)), lambda: _core._RaggedExecutor(plan, runner.comm, True))
    flat = local.detach().contiguous().reshape(-1)
    out = torch.empty(b.local_shape(coord), dtype=local.dtype, device=local.device)
    runner.run(ex, flat, out.reshape(-1))
    return out
