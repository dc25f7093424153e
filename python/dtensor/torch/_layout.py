"""dtensor layouts of torch DTensors and back: meshes, placements, shard orders, specs."""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import _are_we_tracing
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
from torch.distributed.tensor.placement_types import _StridedShard

from .. import _core
from .._ragged import RaggedShard, placements_text
from . import _order_mends, _versions


_TO_DTYPE = {
    torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
    torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2", torch.int64: "i64", torch.int32: "i32",
    torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
}
_FROM_DTYPE = {v: k for k, v in _TO_DTYPE.items()}
_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
               "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}


# ---------------------------------------------------------------- layouts

def _dtype_name(dtype: torch.dtype) -> str:
    try:
        return _TO_DTYPE[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} has no dtensor equivalent (supported: "
                         f"{', '.join(str(d) for d in _TO_DTYPE)})") from None


class _MeshInfo:
    """A DeviceMesh as dtensor sees it: mesh ranks renumbered 0..N-1 in ascending torch-rank order."""

    def __init__(self, device_mesh: DeviceMesh):
        t = device_mesh.mesh
        flat = [int(r) for r in t.flatten().tolist()]
        self.torch_ranks = sorted(flat)               # dense id -> torch global rank
        self.dense = {r: i for i, r in enumerate(self.torch_ranks)}
        self.shape = list(t.shape)
        self.grid = t                                 # coordinate -> torch global rank
        explicit = [self.dense[r] for r in flat]
        if explicit == list(range(len(flat))):
            explicit = []
        names = list(device_mesh.mesh_dim_names or [])
        self.mesh = _core.Mesh(self.shape, names, explicit)
        self.name = str(device_mesh)

    def my_coord(self) -> tuple[int, list]:
        """This process's torch rank and its mesh coordinate (ValueError when it is not on the mesh)."""
        me = dist.get_rank()
        if me not in self.dense:
            raise ValueError(f"rank {me} is not on the device mesh {self.name}")
        return me, [int(c) for c in (self.grid == me).nonzero()[0].tolist()]


_mesh_lock = threading.Lock()
_meshes: dict[int, tuple[DeviceMesh, _MeshInfo]] = {}


def _mesh_info(device_mesh: DeviceMesh) -> _MeshInfo:
    with _mesh_lock:
        hit = _meshes.get(id(device_mesh))
        if hit is not None and hit[0] is device_mesh:
            return hit[1]
        info = _MeshInfo(device_mesh)
        _meshes[id(device_mesh)] = (device_mesh, info)
        return info


def _to_core_placement(p) -> _core.Placement:
    if isinstance(p, _StridedShard):
        return _core.Placement.strided_shard(p.dim, p.split_factor)
    if isinstance(p, Shard):
        return _core.Placement.shard(p.dim)
    if isinstance(p, Replicate):
        return _core.Placement.replicate()
    if isinstance(p, Partial):
        op = str(p.reduce_op)
        if op not in _REDUCE_OPS:
            raise ValueError(f"Partial({op!r}): dtensor supports the reduce ops {', '.join(_REDUCE_OPS)}")
        return _core.Placement.partial(op)
    raise ValueError(f"placement {p!r} is not Shard, _StridedShard, Replicate or Partial")


def _shard_order_arg(shard_order) -> Optional[list]:
    if shard_order is None:
        return None
    out = []
    for e in shard_order:
        try:
            tensor_dim, mesh_dims = e
            out.append((int(tensor_dim), [int(m) for m in mesh_dims]))
        except (TypeError, ValueError):
            raise ValueError(f"shard_order entry {e!r} is not ShardOrderEntry(tensor_dim, mesh_dims)") from None
    return out


def layout_of(x, placements: Optional[Sequence] = None, shape: Optional[Sequence[int]] = None,
              dtype: Optional[torch.dtype] = None, shard_order=None) -> _core.Layout:
    """The dtensor Layout of a torch DTensor, or of (DeviceMesh, placements, shape, dtype, shard_order).

    For a DTensor the placements, shape, dtype and shard order are its own unless given.
    RuntimeError on a torch outside the supported minors (_versions), whose specs may mean
    other things.
    """
    _versions.current()
    if isinstance(x, DTensor):
        spec = x._spec
        mesh = x.device_mesh
        if placements is None:
            placements = spec.placements
            if shard_order is None and not spec.use_strided_shard_as_shard_order:
                shard_order = spec.shard_order
        shape = x.shape if shape is None else shape
        dtype = x.dtype if dtype is None else dtype
    elif isinstance(x, DeviceMesh):
        mesh = x
        if placements is None or shape is None:
            raise ValueError("layout_of(DeviceMesh, ...) needs placements and shape")
        dtype = torch.float32 if dtype is None else dtype
    else:
        raise ValueError(f"layout_of: expected a DTensor or a DeviceMesh, got {type(x).__name__}")
    info = _mesh_info(mesh)
    placements = list(placements)
    if len(placements) != info.mesh.ndim:
        raise ValueError(f"{len(placements)} placements for a {info.mesh.ndim}-d mesh {info.mesh}")
    if any(isinstance(p, RaggedShard) for p in placements):
        # a layout torch cannot hold: dtensor's RaggedLayout (the others in their default order)
        if shard_order is not None:
            raise ValueError("a layout with a RaggedShard takes no shard_order (its other splits keep the default order)")
        text = placements_text([p if isinstance(p, RaggedShard) else _to_core_placement(p) for p in placements])
        return _core.RaggedLayout(info.mesh, [int(s) for s in shape], text, _dtype_name(dtype))
    core = [_to_core_placement(p) for p in placements]
    if any(isinstance(p, _StridedShard) for p in placements):
        shard_order = None  # torch's convention: _StridedShard placements carry the order
    return _core.Layout.from_placements(info.mesh, [int(s) for s in shape], core, _dtype_name(dtype),
                                        _shard_order_arg(shard_order))


def placements_of(layout: _core.Layout) -> tuple[tuple, Optional[tuple]]:
    """torch placements and shard order (a tuple of ShardOrderEntry, or None for the default order)
    of a dtensor Layout."""
    _versions.current()
    out = []
    for p in layout.placements:
        if p.kind == "shard":
            out.append(Shard(p.dim))
        elif p.kind == "strided_shard":
            out.append(_StridedShard(p.dim, split_factor=p.split_factor))
        elif p.kind == "replicate":
            out.append(Replicate())
        else:
            out.append(Partial(p.reduce_op))
    order = tuple(ShardOrderEntry(d, tuple(ms)) for d, ms in layout.shard_order)
    default = all(list(ms) == sorted(ms) for _, ms in layout.shard_order)
    return tuple(out), (None if default else order)


_IDENTITY = {"sum": 0, "avg": None, "max": None, "min": None, "product": 1}


def distribute(tensor: torch.Tensor, device_mesh: DeviceMesh, placements: Sequence, *, shard_order=None):
    """A DTensor with `placements` (and `shard_order`) cut from `tensor`, which every rank holds in
    full: each rank keeps exactly its own elements under dtensor's (= PyTorch's) layout rules,
    _StridedShard and shard orders included; no communication. On a Partial mesh dim the rank at
    coordinate 0 holds the value and the others the op's identity (0 for sum, 1 for product, the
    value itself for avg, max and min), so the reduction gives `tensor` back. With a RaggedShard
    among the placements (no DTensor holds one) the rank's piece as a plain tensor of shape
    (rows, trailing extents...) instead."""
    layout = layout_of(device_mesh, placements, tensor.shape, tensor.dtype, shard_order)
    _, coord = _mesh_info(device_mesh).my_coord()
    if isinstance(layout, _core.RaggedLayout):
        # no DTensor can hold a RaggedShard: the rank's piece itself, (rows, trailing extents...)
        flat = tensor.detach().reshape(-1)
        runs = layout.owned_runs(coord)
        piece = torch.cat([flat[a:b] for a, b in runs]) if runs else flat[:0]
        return piece.clone().reshape(layout.local_shape(coord))
    local = tensor.detach()
    for d, runs in enumerate(layout.owned_runs(coord)):
        idx = torch.cat([torch.arange(a, b) for a, b in runs]) if runs else torch.empty(0, dtype=torch.long)
        local = local.index_select(d, idx.to(local.device))
    local = local.contiguous()
    for m, p in enumerate(layout.placements):
        if p.kind == "partial" and coord[m] != 0 and _IDENTITY[p.reduce_op] is not None:
            local.fill_(_IDENTITY[p.reduce_op])
    return DTensor(local, _spec_of(device_mesh, layout), requires_grad=False)


def _spec_of(device_mesh, layout: _core.Layout) -> DTensorSpec:
    placements, order = placements_of(layout)
    if order is not None:
        _order_mends.install()  # torch loses explicit orders in three places (_order_mends)
    shape = list(layout.shape)
    stride, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        stride[i] = acc
        acc *= shape[i]
    meta = TensorMeta(torch.Size(shape), tuple(stride), _FROM_DTYPE[layout.dtype])
    if any(isinstance(p, _StridedShard) for p in placements):
        if order is None:
            return DTensorSpec(device_mesh, placements, tensor_meta=meta)
        return DTensorSpec(device_mesh, placements, tensor_meta=meta, shard_order=order,
                           use_strided_shard_as_shard_order=False)
    return DTensorSpec(device_mesh, placements, tensor_meta=meta, shard_order=order)
