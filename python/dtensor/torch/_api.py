"""The API: redistribute one tensor, many at once, or onto another mesh, and their plans."""

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
from . import _execution as _ex
from ._execution import _Call, _call_for, _default_group, _model_key, _placements_arg, _runner, _target_layout
from ._layout import _dtype_name, _mesh_info, _spec_of, layout_of


def plan_for(x: DTensor, placements: Sequence, *, shard_order=None, cost_model: Any = "default",
             cache: Optional[_core.PlanCache] = None) -> _core.Plan:
    """The plan `redistribute(x, placements, ...)` would run, without running it."""
    if not isinstance(x, DTensor):
        raise ValueError(f"expected a torch DTensor, got {type(x).__name__}")
    src, dst = layout_of(x), _target_layout(x, _placements_arg(placements), shard_order)
    return (cache if cache is not None else _ex._cache).get(src, dst, cost_model)


class _Redistribute(torch.autograd.Function):
    """dtensor's redistribution with torch's gradient rule (its `Redistribute`): the backward
    redistributes the gradient to the source's placements and shard order, a Partial source dim
    becoming Replicate where the gradient is sharded or replicated on it."""

    @staticmethod
    def forward(ctx, x, placements, shard_order, cost_model, cache):  # noqa: D102
        spec = x._spec
        ctx.src_placements = spec.placements
        ctx.src_order = None if spec.use_strided_shard_as_shard_order else spec.shard_order
        ctx.cost_model, ctx.cache = cost_model, cache
        call = _call_for(x, placements, shard_order, cost_model, cache)
        return DTensor(call.run(x._local_tensor), call.spec, requires_grad=x.requires_grad)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        if not isinstance(grad, DTensor):
            raise RuntimeError(f"dtensor.torch.redistribute backward: expected a DTensor gradient, got {type(grad).__name__}")
        target = tuple(Replicate() if p.is_partial() and not g.is_partial() else p
                       for g, p in zip(grad._spec.placements, ctx.src_placements))
        out = redistribute(grad, target, shard_order=ctx.src_order, cost_model=ctx.cost_model, cache=ctx.cache)
        return out, None, None, None, None


def redistribute(x: DTensor, placements: Sequence, *, shard_order=None, cost_model: Any = "default",
                 cache: Optional[_core.PlanCache] = None, async_op: bool = False) -> DTensor:
    """x redistributed to `placements` (and `shard_order`), as a new DTensor on the same mesh.

    dtensor plans the cheapest sequence of steps under `cost_model` ("default", "pytorch", a
    profile path or a dtensor.CostModel), the same plan on every rank; plans are cached per
    (layouts, cost model) in `cache` (a dtensor.PlanCache; a module-wide one by default).

    Differentiable as torch's `DTensor.redistribute` is: when `x` requires grad (and grad mode is
    on) the backward redistributes the gradient to x's layout. Otherwise no autograd node is
    made. Equivalent layouts return a DTensor over the same local tensor, as torch does.
    `async_op`: as torch's. On a GPU the collectives are ordered on the current stream (the call
    returns once they are queued). On CPU, when the plan ends with a collective, that collective
    is left in flight and the result's local tensor is an AsyncCollectiveTensor that waits for it
    on first use (torch's funcol); the earlier steps, which the later ones read, complete first.
    Under autograd the call is synchronous.
    """
    if not isinstance(x, DTensor):
        raise ValueError(f"expected a torch DTensor, got {type(x).__name__}")
    if not isinstance(async_op, bool):
        raise TypeError(f"async_op: expected True or False, got {type(async_op).__name__}")
    placements = _placements_arg(placements)
    if x.requires_grad and torch.is_grad_enabled():
        return _Redistribute.apply(x, placements, shard_order, cost_model, cache)
    call = _call_for(x, placements, shard_order, cost_model, cache)
    return DTensor(call.run(x._local_tensor, async_op), call.spec, requires_grad=False)


# ---------------------------------------------------------------- many tensors at once

def plan_many(xs: Sequence[DTensor], placements_list: Sequence, *, shard_orders=None,
              cost_model: Any = "default") -> _core.BatchPlan:
    """The batch plan `redistribute_many(xs, placements_list, ...)` would run, without running it."""
    xs = list(xs)
    placements_list = list(placements_list)
    if not xs:
        raise ValueError("redistribute_many: no tensors")
    if len(placements_list) != len(xs):
        raise ValueError(f"redistribute_many: {len(xs)} tensors but {len(placements_list)} placements")
    orders = [None] * len(xs) if shard_orders is None else list(shard_orders)
    if len(orders) != len(xs):
        raise ValueError(f"redistribute_many: {len(xs)} tensors but {len(orders)} shard orders")
    mesh = None
    pairs = []
    for i, x in enumerate(xs):
        if not isinstance(x, DTensor):
            raise ValueError(f"redistribute_many: xs[{i}] is a {type(x).__name__}, not a DTensor")
        if mesh is None:
            mesh = x.device_mesh
        elif x.device_mesh is not mesh and x.device_mesh != mesh:
            raise ValueError(f"redistribute_many: xs[{i}] is on mesh {x.device_mesh}, xs[0] on {mesh}: one mesh per batch")
        pairs.append((layout_of(x), _target_layout(x, _placements_arg(placements_list[i]), orders[i])))
    return _ex._batch_cache.get(pairs, cost_model)


def redistribute_many(xs: Sequence[DTensor], placements_list: Sequence, *, shard_orders=None,
                      cost_model: Any = "default") -> list:
    """Each of `xs` redistributed to its placements in `placements_list`, as one batch
    (docs/batch.md): every tensor on its own optimal plan, small tensors' collectives coalesced
    into one where the cost model says it pays. All tensors on one DeviceMesh and device. torch has
    no batched redistribute; the results equal `redistribute` on each.

    Differentiable with `redistribute`'s rule, tensor by tensor: when any of `xs` requires grad
    (and grad mode is on) the backward redistributes the gradients that arrive, again as one batch,
    to their sources' layouts (a Partial source dim becoming Replicate where the gradient is not
    Partial); results of tensors that do not require grad do not either."""
    xs = list(xs)
    if any(isinstance(x, DTensor) and x.requires_grad for x in xs) and torch.is_grad_enabled():
        return list(_RedistributeMany.apply((list(placements_list), shard_orders, cost_model), *xs))
    return _redistribute_many(xs, placements_list, shard_orders, cost_model)


def _redistribute_many(xs: list, placements_list, shard_orders, cost_model) -> list:
    batch = plan_many(xs, placements_list, shard_orders=shard_orders, cost_model=cost_model)
    mesh = xs[0].device_mesh
    device = xs[0]._local_tensor.device
    for i, x in enumerate(xs):
        if x._local_tensor.device != device:
            raise ValueError(f"redistribute_many: xs[{i}] is on {x._local_tensor.device}, xs[0] on {device}")
    plans = batch.plans  # per tensor (one conversion)
    outs = run_batch(batch, plans, mesh, [x._local_tensor for x in xs])
    return [DTensor(o, _spec_of(mesh, p.dst), requires_grad=False) for o, p in zip(outs, plans)]


def run_batch(batch: _core.BatchPlan, plans: list, mesh: DeviceMesh, locals_: list) -> list:
    """Runs `batch` (its `plans`, one per tensor) on this rank's local tensors `locals_` (the
    sources' shards, on one device) over `mesh`'s groups; returns the targets' local tensors."""
    device = locals_[0].device
    runner = _runner(mesh, device)
    rank = runner.comm.rank
    ex = runner.batch_executor(batch)
    locals_ = [(t if t.is_contiguous() else t.contiguous()).detach() for t in locals_]
    outs, wss = [], []
    for i, (local, p) in enumerate(zip(locals_, plans)):
        outs.append(torch.empty(p.dst.local_shape(rank), dtype=local.dtype, device=device))
        wss.append(torch.empty(max(ex.workspace_bytes(i), 0), dtype=torch.uint8, device=device))
    staging = torch.empty(max(ex.staging_bytes, 0), dtype=torch.uint8, device=device)
    with runner.lock:
        runner.set_buffers(*locals_, *outs, *wss, staging)
        try:
            ex.execute([(a.data_ptr(), a.numel() * a.element_size(), b.data_ptr(), b.numel() * b.element_size(),
                         w.data_ptr(), w.numel()) for a, b, w in zip(locals_, outs, wss)],
                       staging.data_ptr(), staging.numel())
        finally:
            runner.impl.buffers = ()
            runner.impl.views = None
    return outs


class _RedistributeMany(torch.autograd.Function):
    """redistribute_many with `_Redistribute`'s gradient rule for each tensor; the backward moves
    the gradients that arrive as one batch."""

    @staticmethod
    def forward(ctx, args, *xs):  # noqa: D102
        placements_list, shard_orders, cost_model = args
        ctx.sources = [(x._spec.placements, None if x._spec.use_strided_shard_as_shard_order else x._spec.shard_order)
                       for x in xs]
        ctx.cost_model = cost_model
        outs = _redistribute_many(list(xs), placements_list, shard_orders, cost_model)
        ctx.mark_non_differentiable(*(o for o, x in zip(outs, xs) if not x.requires_grad))
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):  # noqa: D102
        live = [i for i, g in enumerate(grads) if g is not None and ctx.needs_input_grad[i + 1]]
        for i in live:
            if not isinstance(grads[i], DTensor):
                raise RuntimeError(f"dtensor.torch.redistribute_many backward: expected a DTensor gradient for "
                                   f"xs[{i}], got {type(grads[i]).__name__}")
        out = [None] * len(grads)
        if live:
            targets = [tuple(Replicate() if p.is_partial() and not g.is_partial() else p
                             for g, p in zip(grads[i]._spec.placements, ctx.sources[i][0])) for i in live]
            moved = redistribute_many([grads[i] for i in live], targets,
                                      shard_orders=[ctx.sources[i][1] for i in live], cost_model=ctx.cost_model)
            for i, m in zip(live, moved):
                out[i] = m
        return (None, *out)


# ---------------------------------------------------------------- cross-mesh

_world_meshes: dict = {}


def _world_mesh(device: torch.device) -> DeviceMesh:
    """A 1-d DeviceMesh over every rank of the default process group (the cross-mesh transfer's)."""
    key = (id(_default_group()), device.type)
    m = _world_meshes.get(key)
    if m is None:
        m = DeviceMesh(device.type, torch.arange(dist.get_world_size()))
        _world_meshes[key] = m
    return m


def plan_reshard(x: DTensor, device_mesh: DeviceMesh, placements: Sequence, *, shard_order=None,
                 cost_model: Any = "default") -> _core.CrossMeshPlan:
    """The plan `reshard(x, device_mesh, placements, ...)` would run, without running it."""
    if not isinstance(x, DTensor):
        raise ValueError(f"expected a torch DTensor, got {type(x).__name__}")
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"device_mesh: expected a torch DeviceMesh, got {type(device_mesh).__name__}")
    if isinstance(placements, str):
        dst = _core.Layout(_mesh_info(device_mesh).mesh, list(x.shape), placements, dtype=_dtype_name(x.dtype))
    else:
        dst = layout_of(device_mesh, _placements_arg(placements), x.shape, x.dtype, shard_order)
    src = layout_of(x)
    return _core.plan_cross_mesh(src, dst, src_ranks=_mesh_info(x.device_mesh).torch_ranks,
                                 dst_ranks=_mesh_info(device_mesh).torch_ranks, cost_model=cost_model,
                                 world_size=dist.get_world_size())


def reshard(x: DTensor, device_mesh: DeviceMesh, placements: Sequence, *, shard_order=None,
            cost_model: Any = "default") -> Optional[DTensor]:
    """x moved to `placements` on another DeviceMesh (docs/cross-mesh.md), which torch's
    redistribute refuses. Every rank of the default process group calls it (ranks on neither mesh
    too: they take part in no transfer but in the plan check); a rank on `device_mesh` gets its
    part as a DTensor, any other rank None. The two meshes may share ranks, be disjoint, or hold
    the same ranks in another shape. Not differentiable (no autograd node)."""
    plan = plan_reshard(x, device_mesh, placements, shard_order=shard_order, cost_model=cost_model)
    device = x._local_tensor.device
    me = dist.get_rank()
    src_info, dst_info = _mesh_info(x.device_mesh), _mesh_info(device_mesh)
    world = _runner(_world_mesh(device), device)
    on_src = _runner(x.device_mesh, device) if me in src_info.dense else None
    on_dst = _runner(device_mesh, device) if me in dst_info.dense else None
    local = x._local_tensor if on_src is not None else torch.empty(0, dtype=x.dtype, device=device)
    if not local.is_contiguous():
        local = local.contiguous()
    out_shape = plan.dst.local_shape(dst_info.dense[me]) if on_dst is not None else [0]
    out = torch.empty(out_shape, dtype=x.dtype, device=device)
    # each runner once (source and target may be one mesh), locked in one order: its buffers are
    # this call's until it returns, as redistribute holds them
    runners = sorted({id(r): r for r in (world, on_src, on_dst) if r is not None}.values(), key=id)
    ex = _core._CrossMeshExecutor(plan, world.comm, on_src.comm if on_src else None, on_dst.comm if on_dst else None)
    ws = torch.empty(max(ex.workspace_bytes, 0), dtype=torch.uint8, device=device)
    with contextlib.ExitStack() as held:
        for r in runners:
            held.enter_context(r.lock)
            r.set_buffers(local, out, ws)
        try:
            ex.execute(local.data_ptr(), local.numel() * local.element_size(), out.data_ptr(),
                       out.numel() * out.element_size(), ws.data_ptr(), ws.numel())
        finally:
            for r in runners:
                r.impl.buffers = ()
                r.impl.views = None
    if on_dst is None:
        return None
    return DTensor(out, _spec_of(device_mesh, plan.dst), requires_grad=False)
