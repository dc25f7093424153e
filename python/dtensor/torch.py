"""PyTorch integration: dtensor layouts of torch DTensors, and redistributions planned by dtensor
and run as torch.distributed collectives.

    import dtensor.torch as dt
    y = dt.redistribute(x, [Shard(1), Replicate()])          # x: a torch DTensor
    print(dt.plan_for(x, [Shard(1), Replicate()]).explain())

Placements are torch's own (``Shard``, ``_StridedShard``, ``Replicate``, ``Partial``). A shard
order is torch's form too: a tuple of ``ShardOrderEntry(tensor_dim, mesh_dims)`` with each sharded
tensor dim's mesh dims in split order (first = outermost split); ``None`` means ascending mesh
dim order. Layouts with ``_StridedShard`` carry their order in the placements (torch's
convention), so they take no separate shard order.

``redistribute`` runs on the tensor's own device and the process groups of ``x.device_mesh``
(gloo on CPU, NCCL on GPU): dtensor's executor decides every copy and collective (from the plan)
and torch.distributed moves the data. Every rank must call it with the same arguments, as for any
collective. It is differentiable with torch's rule.

``enable()`` / ``disable()`` / ``with enabled():`` put dtensor inside torch's own loop: torch's
``redistribute_local_tensor`` is replaced, so ``x.redistribute``, ``full_tensor()``, the implicit
redistributions of DTensor ops and their backward passes run dtensor's plans; ``stats()`` says
how many, and which calls fell back to torch's function and why.
"""
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

from . import _core

__all__ = ["layout_of", "placements_of", "distribute", "redistribute", "redistribute_many", "plan_many", "reshard", "plan_reshard", "plan_for", "clear_caches", "enable",
           "disable", "enabled", "is_enabled", "stats", "reset_stats", "set_plan_check"]

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
    """
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
    core = [_to_core_placement(p) for p in placements]
    if any(isinstance(p, _StridedShard) for p in placements):
        shard_order = None  # torch's convention: _StridedShard placements carry the order
    return _core.Layout.from_placements(info.mesh, [int(s) for s in shape], core, _dtype_name(dtype),
                                        _shard_order_arg(shard_order))


def placements_of(layout: _core.Layout) -> tuple[tuple, Optional[tuple]]:
    """torch placements and shard order (a tuple of ShardOrderEntry, or None for the default order)
    of a dtensor Layout."""
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


def distribute(tensor: torch.Tensor, device_mesh: DeviceMesh, placements: Sequence, *, shard_order=None) -> DTensor:
    """A DTensor with `placements` (and `shard_order`) cut from `tensor`, which every rank holds in
    full: each rank keeps exactly its own elements under dtensor's (= PyTorch's) layout rules,
    _StridedShard and shard orders included; no communication. On a Partial mesh dim the rank at
    coordinate 0 holds the value and the others the op's identity (0 for sum, 1 for product, the
    value itself for avg, max and min), so the reduction gives `tensor` back."""
    layout = layout_of(device_mesh, placements, tensor.shape, tensor.dtype, shard_order)
    _, coord = _mesh_info(device_mesh).my_coord()
    local = tensor.detach()
    for d, runs in enumerate(layout.owned_runs(coord)):
        idx = torch.cat([torch.arange(a, b) for a, b in runs]) if runs else torch.empty(0, dtype=torch.long)
        local = local.index_select(d, idx.to(local.device))
    local = local.contiguous()
    for m, p in enumerate(layout.placements):
        if p.kind == "partial" and coord[m] != 0 and _IDENTITY[p.reduce_op] is not None:
            local.fill_(_IDENTITY[p.reduce_op])
    return DTensor(local, _spec_of(device_mesh, layout), requires_grad=False)


_to_local_keeps_order = False


def _keep_order_through_to_local() -> None:
    """torch's `to_local` backward (`_ToTorchTensor`, 2.11-2.15) rebuilds the gradient with
    `DTensor.from_local`, which knows no shard order: the gradient of a DTensor with an explicit,
    non-default order comes back labelled with the default order while its local data is laid out
    in the explicit one (docs/torch-defects.md). dtensor's shard orders are what make such
    DTensors, so on the first one it makes, it wraps that backward: where the forward's spec had
    an order the rebuilt gradient lost (same placements otherwise), the gradient gets the order
    back. Nothing else changes, and DTensors without an explicit order are never touched."""
    global _to_local_keeps_order
    if _to_local_keeps_order:
        return
    from torch.distributed.tensor import _api
    original = _api._ToTorchTensor.backward

    def backward(ctx, grad_output):
        grad, *rest = original(ctx, grad_output)
        spec = getattr(ctx, "dtensor_spec", None)
        if isinstance(grad, DTensor) and spec is not None and not spec.use_strided_shard_as_shard_order:
            want = tuple(Replicate() if p.is_partial() else p for p in spec.placements)
            g = grad._spec
            if tuple(g.placements) == want and g.shard_order != spec.shard_order:
                strided = any(isinstance(p, _StridedShard) for p in want)
                fixed = DTensorSpec(g.mesh, g.placements, tensor_meta=g.tensor_meta, shard_order=spec.shard_order,
                                    **({"use_strided_shard_as_shard_order": False} if strided else {}))
                grad = DTensor(grad._local_tensor, fixed, requires_grad=grad.requires_grad)
        return (grad, *rest)

    _api._ToTorchTensor.backward = staticmethod(backward)
    _to_local_keeps_order = True


def _spec_of(device_mesh, layout: _core.Layout) -> DTensorSpec:
    placements, order = placements_of(layout)
    if order is not None:
        _keep_order_through_to_local()
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


# ---------------------------------------------------------------- execution

def _timeout_of(pg, device: torch.device):
    """The timeout a process group's backend for `device` runs with (None where torch hides it)."""
    try:
        options = pg._get_backend(device).options
    except Exception:  # noqa: BLE001 - a backend without options (MPI, a fake group): unknown
        return None
    return getattr(options, "timeout", None) or getattr(options, "_timeout", None)


def _set_timeout(timeout, pg) -> None:
    """dist.set_timeout (torch 2.15); torch 2.11 has it as distributed_c10d._set_pg_timeout."""
    setter = getattr(dist, "set_timeout", None)
    if setter is None:
        from torch.distributed import distributed_c10d
        setter = distributed_c10d._set_pg_timeout
    setter(timeout, pg)


class _Failing:
    """Turns a backend's failure inside a collective (gloo's "Connection reset by peer" or
    "Timed out waiting", NCCL's errors: torch raises RuntimeError or its DistBackendError) into a
    dtensor.BackendError naming the collective, the mesh dims and the peer ranks (torch ranks)."""

    __slots__ = ("comm", "what", "mesh_dims", "peers")

    def __init__(self, comm, what: str, mesh_dims, peers=None):
        self.comm, self.what, self.mesh_dims, self.peers = comm, what, mesh_dims, peers

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or not isinstance(err, RuntimeError) or isinstance(err, _core.BackendError):
            return False
        c = self.comm
        if self.peers is not None:
            peers = sorted(set(self.peers))
        elif self.mesh_dims is not None:
            peers = [r for r in c.members.get(tuple(self.mesh_dims), []) if r != c.my_rank]
        else:
            peers = [r for r in c.info.torch_ranks if r != c.my_rank]
        where = f" over mesh dims {list(self.mesh_dims)}" if self.mesh_dims is not None else ""
        text = " ".join(str(err).split())
        if len(text) > 400:
            text = text[:400] + " ..."
        raise _core.BackendError(f"dtensor.torch: {self.what}{where} failed on rank {c.my_rank} (peer ranks "
                                 f"{peers}): {type(err).__name__}: {text}") from err


class _TorchComm:
    """The collectives and (device) copies of dtensor's executor, on torch tensors.

    The executor hands addresses inside the three buffers of the current call (input, output,
    workspace); `_view` maps an address range back to a uint8 view of the buffer holding it.
    """

    def __init__(self, device_mesh: DeviceMesh, info: _MeshInfo, device: torch.device):
        self.device_mesh = device_mesh
        self.info = info
        self.device = device
        self.my_rank, self.coord = info.my_coord()
        self.groups: dict[tuple, tuple] = {}
        self.members: dict[tuple, list] = {}  # mesh dims -> the group's torch ranks, in member order
        self.whole = None
        self.buffers: tuple = ()
        self.views: Optional[list] = None
        # async_op on CPU: collectives issued with async_op=True, their works waited at the next
        # synchronize() except the `defer`-th (0-based), the call's last, left in flight
        self.defer = -1
        self.syncs = 0
        self.pending: list = []

    def begin_async(self, last: int) -> None:
        self.defer, self.syncs, self.pending = last, 0, []

    def end_async(self):
        """The one work left in flight by the call, or None (anything else is waited for)."""
        pending, self.pending, self.defer = self.pending, [], -1
        if len(pending) == 1:
            return pending[0]
        with _Failing(self, "the wait for an async_op call's collectives", None):
            for w in pending:
                w.wait()
        return None

    def _issued(self, work) -> None:
        if work is not None:
            self.pending.append(work)

    # -- buffers
    def set_buffers(self, *tensors: torch.Tensor) -> None:
        # byte views are made on first use (a plan of local copies on CPU never asks for one)
        self.buffers = tensors
        self.views = None

    def _view(self, address: int, nbytes: int) -> torch.Tensor:
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        if self.views is None:
            self.views = [t.reshape(-1).view(torch.uint8) for t in self.buffers if t.numel() > 0]
        for b in self.views:
            base = b.data_ptr()
            if base <= address and address + nbytes <= base + b.numel():
                return b[address - base:address - base + nbytes]
        raise _core.BackendError(f"dtensor.torch: address {address:#x} (+{nbytes} bytes) is in none of the call's buffers")

    def _typed(self, address: int, count: int, dtype: str) -> torch.Tensor:
        td = _FROM_DTYPE[dtype]
        return self._view(address, count * _core.itemsize(dtype)).view(td)

    # -- groups
    def _group(self, mesh_dims) -> tuple:
        key = tuple(mesh_dims)
        g = self.groups.get(key)
        if g is not None:
            return g
        # members: this rank's coordinates elsewhere, row-major over `mesh_dims` in the listed order
        members = []
        sizes = [self.info.shape[d] for d in key]
        n = 1
        for s in sizes:
            n *= s
        for i in range(n):
            c, rest = list(self.coord), i
            for d, s in zip(reversed(key), reversed(sizes)):
                c[d] = rest % s
                rest //= s
            members.append(int(self.info.grid[tuple(c)]))
        # every group waits as long as the world does (init_process_group's timeout), not the
        # backend's default (a stalled peer would otherwise block the others for 10-30 minutes)
        world_timeout = _timeout_of(dist.group.WORLD, self.device)
        if len(key) == 1:
            pg = self.device_mesh.get_group(key[0])
            current = _timeout_of(pg, self.device)
            if world_timeout is not None and current is not None and current > world_timeout:
                _set_timeout(world_timeout, pg)
        else:
            pg = dist.new_group(sorted(members), use_local_synchronization=True, timeout=world_timeout)
        pg_ranks = dist.get_process_group_ranks(pg)
        if sorted(pg_ranks) != sorted(members):
            raise _core.BackendError(f"dtensor.torch: the process group of mesh dims {list(key)} holds ranks "
                                     f"{pg_ranks}, expected {members}")
        order = [members.index(r) for r in pg_ranks]  # member position of each group rank
        perm = None if order == list(range(n)) else torch.tensor(order, device=self.device)
        g = (pg, n, perm, members.index(self.my_rank))
        self.groups[key] = g
        self.members[key] = members
        return g

    def prepare(self, groups) -> None:
        for dims in groups:
            self._group(dims)

    def supports(self, kind: str, dtype: str, op: str) -> bool:
        # dtensor's rule (collective.hpp: `reducible`, no average of booleans) narrowed to what
        # torch's process groups reduce: no fp8, no average of any integer dtype
        if kind in ("reduce_scatter", "all_reduce"):
            if dtype.startswith("f8"):
                return False
            if op == "avg" and dtype in ("i64", "i32", "i8", "u8", "bool"):
                return False
        return True

    def exchange(self, value: int) -> list:
        n = len(self.info.torch_ranks)
        if self.whole is None:
            if n == dist.get_world_size():
                self.whole = dist.group.WORLD
            else:
                self.whole = dist.new_group(self.info.torch_ranks, use_local_synchronization=True,
                                            timeout=_timeout_of(dist.group.WORLD, self.device))
        # Every rank's value as a sum: each writes its own slot (group rank order == ascending torch
        # rank == dense id), zeros elsewhere, so the int64 sum is exact. An all_reduce, not an
        # all_gather: gloo's all_gather of 8 bytes over 4 ranks took 2.4 ms on the development
        # machine, its all_reduce of 4 int64 0.6 ms (docs/python.md).
        t = torch.zeros(n, dtype=torch.int64, device=self.device)
        t[dist.get_rank(self.whole)] = value
        with _Failing(self, "the plan-hash exchange (all_reduce)", None):
            dist.all_reduce(t, group=self.whole)
        return [int(v) for v in t.cpu().tolist()]

    # -- collectives
    @staticmethod
    def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.numel() == 0 or b.numel() == 0:
            return False
        return a.data_ptr() < b.data_ptr() + b.numel() * b.element_size() and \
            b.data_ptr() < a.data_ptr() + a.numel() * a.element_size()

    @staticmethod
    def _into_members(collective, recv, send, n, width, perm, pg) -> None:
        """Runs `collective(out, send, group=pg)`, whose output is in process-group rank order, and
        leaves it in `recv` in dtensor's member order (perm[j]: the member position of group rank j)."""
        if perm is None:
            return collective(recv, send, group=pg)
        tmp = torch.empty_like(recv)
        work = collective(tmp, send, group=pg)
        if work is not None:  # issued async (an async_op call): the reorder below reads it
            work.wait()
        recv.view(n, width)[perm] = tmp.view(n, width)
        return None

    def all_gather(self, mesh_dims, send, recv, count, dtype) -> None:
        pg, n, perm, _ = self._group(mesh_dims)
        nb = count * _core.itemsize(dtype)
        s, r = self._view(send, nb), self._view(recv, nb * n)
        if nb == 0:
            return
        if self._overlaps(s, r):
            s = s.clone()
        with _Failing(self, "all_gather", mesh_dims):
            self._issued(self._into_members(self._op(dist.all_gather_into_tensor), r, s, n, nb, perm, pg))

    def reduce_scatter(self, mesh_dims, send, recv, count, dtype, op) -> None:
        pg, n, perm, _ = self._group(mesh_dims)
        if count == 0:
            return
        s, r = self._typed(send, count * n, dtype), self._typed(recv, count, dtype)
        if perm is not None:
            s = s.view(n, count)[perm].reshape(-1)
        elif self._overlaps(s, r):
            s = s.clone()
        with _Failing(self, "reduce_scatter", mesh_dims):
            self._issued(dist.reduce_scatter_tensor(r, s, op=_REDUCE_OPS[op], group=pg, async_op=self.defer >= 0))

    def all_reduce(self, mesh_dims, send, recv, count, dtype, op) -> None:
        pg, _, _, _ = self._group(mesh_dims)
        if count == 0:
            return
        s, r = self._typed(send, count, dtype), self._typed(recv, count, dtype)
        if s.data_ptr() != r.data_ptr():
            r.copy_(s)
        with _Failing(self, "all_reduce", mesh_dims):
            self._issued(dist.all_reduce(r, op=_REDUCE_OPS[op], group=pg, async_op=self.defer >= 0))

    def all_to_all(self, mesh_dims, send, recv, count, dtype) -> None:
        pg, n, perm, _ = self._group(mesh_dims)
        nb = count * _core.itemsize(dtype)
        if nb == 0:
            return
        s, r = self._view(send, nb * n), self._view(recv, nb * n)
        if perm is not None:
            s = s.view(n, nb)[perm].reshape(-1)
        elif self._overlaps(s, r):
            s = s.clone()
        with _Failing(self, "all_to_all", mesh_dims):
            self._issued(self._into_members(self._op(dist.all_to_all_single), r, s, n, nb, perm, pg))

    def send_recv(self, sends, recvs, dtype) -> None:
        size = _core.itemsize(dtype)
        ops, local_sends = [], []
        for peer, address, count in sends:
            v = self._view(address, count * size)
            if self.info.torch_ranks[peer] == self.my_rank:
                local_sends.append(v)
            elif count:
                ops.append(dist.P2POp(dist.isend, v, self.info.torch_ranks[peer]))
        for peer, address, count in recvs:
            v = self._view(address, count * size)
            if self.info.torch_ranks[peer] == self.my_rank:
                v.copy_(local_sends.pop(0))
            elif count:
                ops.append(dist.P2POp(dist.irecv, v, self.info.torch_ranks[peer]))
        if ops:
            with _Failing(self, "send/recv", None, [op.peer for op in ops]):
                reqs = dist.batch_isend_irecv(ops)
                if self.defer >= 0:
                    self.pending.extend(reqs)
                else:
                    for req in reqs:
                        req.wait()

    def _op(self, collective):
        """`collective`, issued with async_op=True while an async call is running."""
        if self.defer < 0:
            return collective
        return lambda out, inp, group: collective(out, inp, group=group, async_op=True)

    def synchronize(self) -> None:
        # Otherwise the collectives above are issued synchronously (CPU) or ordered on the current
        # stream (GPU): nothing to wait for.
        if self.defer < 0:
            return
        k, self.syncs = self.syncs, self.syncs + 1
        if k == self.defer:
            return  # the call's last collective: left in flight
        pending, self.pending = self.pending, []
        with _Failing(self, "the wait for an async_op call's collectives", None):
            for w in pending:
                w.wait()

    # -- device-memory copies (CPU buffers are copied in C++)
    def copy(self, dst, src, nbytes) -> None:
        d, s = self._view(dst, nbytes), self._view(src, nbytes)
        d.copy_(s.clone() if self._overlaps(d, s) else s)

    def fill(self, dst, dtype, count, value) -> None:
        self._typed(dst, count, dtype).fill_(value)

    def _strided(self, address, run_bytes, count, stride) -> torch.Tensor:
        """The byte view `address + sum(i_k * stride[k]) + j` (j < run_bytes), shape count + [run_bytes].
        Negative strides (the executor fuses copies whose offsets step backwards) are taken from
        the lowest address and flipped: a copy, so only for reading."""
        low = address + sum((c - 1) * st for c, st in zip(count, stride) if st < 0)
        extent = run_bytes + sum((c - 1) * abs(st) for c, st in zip(count, stride))
        base = self._view(low, extent)
        v = base.as_strided(list(count) + [run_bytes], [abs(st) for st in stride] + [1], base.storage_offset())
        flip = [k for k, st in enumerate(stride) if st < 0]
        return v.flip(flip) if flip else v

    def copy_strided(self, dst, src, run_bytes, count, dst_stride, src_stride) -> None:
        if run_bytes == 0 or any(c == 0 for c in count):
            return
        count, ds, ss = list(count), list(dst_stride), list(src_stride)
        # walk the dims where the destination steps backwards in reverse, in both: the written
        # view then has non-negative strides (a view, not a copy)
        for k, c in enumerate(count):
            if ds[k] < 0:
                dst += (c - 1) * ds[k]
                src += (c - 1) * ss[k]
                ds[k], ss[k] = -ds[k], -ss[k]
        self._strided(dst, run_bytes, count, ds).copy_(self._strided(src, run_bytes, count, ss))


# When the ranks' plans are compared: "first_use" (the default: once per plan and process group,
# when its executor is made) or "every_call" (also one exchange of plan hashes over the mesh, an
# all_reduce of one int64 per rank, at the start of every redistribution, so a rank that asks for
# another target than its peers after both plans were cached fails on every rank with the
# plan-hash message; on gloo that exchange costs about as much as a small collective, see
# docs/python.md). DTENSOR_PLAN_CHECK sets it for a process; set_plan_check takes effect on the
# next call, cached calls included.
_PLAN_CHECKS = ("first_use", "every_call")


def set_plan_check(mode: str) -> None:
    """"first_use" (the default) or "every_call": when the ranks' plans are compared (see above)."""
    global _plan_check
    if mode not in _PLAN_CHECKS:
        raise ValueError(f"plan check {mode!r}: expected \"first_use\" or \"every_call\"")
    _plan_check = mode  # read on every call: cached calls take it at once


_plan_check = os.environ.get("DTENSOR_PLAN_CHECK") or "first_use"
if _plan_check not in _PLAN_CHECKS:
    raise ValueError(f"DTENSOR_PLAN_CHECK={_plan_check!r}: expected \"first_use\" or \"every_call\"")


# For tests: run the executor's local copies as torch ops (the GPU path) on CPU tensors too.
_torch_local_copies_on_cpu = False


class _Runner:
    """dtensor's communicator over one DeviceMesh's process groups on one device, the executors of
    the plans it ran, and one workspace they share (grown to the largest plan's need)."""

    def __init__(self, device_mesh: DeviceMesh, device: torch.device, host_copies: bool):
        self.host_copies = host_copies
        self.info = _mesh_info(device_mesh)
        self.impl = _TorchComm(device_mesh, self.info, device)
        self.comm = _core._PyCommunicator(self.info.mesh, self.info.dense[self.impl.my_rank], self.impl, host_copies)
        self.executors: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.device = device
        self.world = _default_group()
        self.workspaces: dict = {}  # stream (GPU) or None (CPU) -> uint8 tensor
        # (output, work) of an async_op call (CPU) whose last collective is in flight, the work
        # registered on the output with torch's functional-collective registry: waited (once,
        # through the registry) before the next run
        self.in_flight = None

    def executor(self, plan: _core.Plan):
        """The executor of `plan` on this runner, made (a collective: the plan hashes are compared)
        on its first use only; the every_call check is made per call by run()."""
        key = (plan.hash, str(plan.src), str(plan.dst), plan.cost_model)
        return self._cached(key, lambda: _core._Executor(plan, self.comm, True, False))

    def batch_executor(self, batch: _core.BatchPlan):
        """The batch executor of `batch` on this runner, made (a collective: the batch hashes are
        compared) on its first use only."""
        key = ("batch", batch.hash, len(batch), batch.cost_model)
        return self._cached(key, lambda: _core._BatchExecutor(batch, self.comm))

    def _cached(self, key, make):
        """The executor under `key`, made by make() on a miss; the 256 most recent are kept."""
        ex = self.executors.get(key)
        if ex is None:
            ex = make()
            self.executors[key] = ex
            if len(self.executors) > 256:
                self.executors.popitem(last=False)
        else:
            self.executors.move_to_end(key)
        return ex

    def _workspace(self, nbytes: int) -> Optional[torch.Tensor]:
        if nbytes <= 0:
            return None
        # on a GPU the work is ordered on the current stream: one workspace per stream, so a call
        # on another stream never overwrites one still in use
        stream = torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else None
        ws = self.workspaces.get(stream)
        if ws is None or ws.numel() < nbytes:
            ws = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
            self.workspaces[stream] = ws
        return ws

    def drain(self) -> None:
        """Waits for the collective an async_op call left in flight (it may read the workspace).

        The work is registered on the call's output, which waits for it on first use as well:
        both go through torch's registry (wait_tensor pops the work), so whichever comes first
        waits and the other finds nothing. A work waited twice would block: gloo's send/recv
        works wait for a second completion that never comes."""
        pending, self.in_flight = self.in_flight, None
        if pending is not None:
            with _Failing(self.impl, "the wait for an async_op call's last collective", None):
                torch.ops._c10d_functional.wait_tensor(pending[0])

    def run(self, ex, local: torch.Tensor, out: torch.Tensor, async_op: bool = False, check: Optional[int] = None):
        """Runs `ex`; with async_op on CPU, returns the work of its last collective left in flight
        (None when everything completed). `check`: a plan hash compared over the mesh first."""
        with self.lock:
            self.drain()
            if check is not None:  # before anything moves
                self.comm.check_plans_agree(check)
            need = ex.workspace_bytes
            ws = self._workspace(need)
            self.impl.set_buffers(local, out) if ws is None else self.impl.set_buffers(local, out, ws)
            defer = async_op and self.device.type == "cpu" and ex.ends_with_collective
            if defer:
                self.impl.begin_async(ex.collectives - 1)
            work = None
            try:
                ex.execute(local.data_ptr(), local.numel() * local.element_size(), out.data_ptr(),
                           out.numel() * out.element_size(), 0 if ws is None else ws.data_ptr(), max(need, 0))
            finally:
                if defer:
                    work = self.impl.end_async()
                self.impl.buffers = ()
                self.impl.views = None
            if work is not None:
                # as torch's funcol does: the tensor waits for its collective on first use
                torch._C._distributed_c10d._register_work(out, work)
                self.in_flight = (out, work)
            return work


def _default_group():
    return dist.distributed_c10d._world.default_pg


_cache = _core.PlanCache(4096)
_runners: dict[tuple, _Runner] = {}
_runners_lock = threading.Lock()


class _Call:
    """One redistribution as it runs every time: (source, target, cost model) on one mesh and
    device, with its executor, the local shapes and the target's DTensorSpec worked out once."""

    __slots__ = ("runner", "ex", "src_shape", "out_shape", "alias", "spec", "world", "src", "dst", "plan_hash", "shared")

    def __init__(self, device_mesh, src: _core.Layout, dst: _core.Layout, plan: _core.Plan, device: torch.device):
        self.runner = _runner(device_mesh, device)
        self.world = self.runner.world
        rank = self.runner.comm.rank
        self.src, self.dst = src, dst
        self.src_shape = torch.Size(src.local_shape(rank))
        self.out_shape = tuple(dst.local_shape(rank))
        # equivalent layouts (a plan of relabel steps only) give every rank the same data: the
        # output is the input tensor itself, as torch's redistribute returns it
        self.alias = all(s.kind == "relabel" for s in plan.steps)
        self.ex = None if self.alias else self.runner.executor(plan)
        self.plan_hash = plan.hash
        self.shared = self.runner.info.mesh.num_ranks > 1  # peers whose plan must agree
        self.spec = None

    def run(self, local: torch.Tensor, async_op: bool = False) -> torch.Tensor:
        if local.shape != self.src_shape:
            raise ValueError(f"rank {dist.get_rank()}: local tensor of shape {list(local.shape)}, but the layout "
                             f"{self.src} gives this rank {list(self.src_shape)}")
        if self.alias:
            # nothing moves, but a peer may be running another plan: the hashes still meet
            if self.shared and _plan_check == "every_call":
                with self.runner.lock:
                    self.runner.comm.check_plans_agree(self.plan_hash)
            return local
        if not local.is_contiguous():
            local = local.contiguous()
        out = torch.empty(self.out_shape, dtype=local.dtype, device=local.device)
        work = self.runner.run(self.ex, local, out, async_op,
                               self.plan_hash if self.shared and _plan_check == "every_call" else None)
        if work is None:
            return out
        # registered on `out` by the runner: the tensor waits for its collective on first use
        from torch.distributed._functional_collectives import AsyncCollectiveTensor
        return AsyncCollectiveTensor(out)


# redistributions by (source spec, target, cost model, device): the per-call path is one lookup
_calls: dict = {}
_CALLS_MAX = 4096


def _remember(table: dict, key, value) -> None:
    if len(table) >= _CALLS_MAX:
        table.pop(next(iter(table)))  # the oldest entry
    table[key] = value


def clear_caches() -> None:
    """Forgets cached plans, executors, workspaces and process groups (e.g. after
    destroy_process_group)."""
    _cache.clear()
    _batch_cache.clear()
    _calls.clear()
    _routes.clear()
    with _runners_lock:
        _runners.clear()
    with _mesh_lock:
        _meshes.clear()


def _at_exit() -> None:
    """Releases executors, communicators and the module's plan cache before the interpreter
    tears the extension down (nanobind reports instances still alive then as leaks)."""
    global _cache, _batch_cache
    clear_caches()
    _cache = None
    _batch_cache = None


atexit.register(_at_exit)


def _runner(device_mesh: DeviceMesh, device: torch.device) -> _Runner:
    host_copies = device.type == "cpu" and not _torch_local_copies_on_cpu
    key = (id(device_mesh), str(device), id(_default_group()), host_copies)
    with _runners_lock:
        r = _runners.get(key)
        if r is None or r.impl.device_mesh is not device_mesh:
            r = _Runner(device_mesh, device, host_copies)
            _runners[key] = r
        return r


def _model_key(cost_model) -> Any:
    """A hashable stand-in for a cost model argument that changes when the model does (a profile
    file: its path, size and modification time), or None when there is none."""
    if isinstance(cost_model, str):
        if cost_model in ("default", "pytorch"):
            return cost_model
        try:
            st = os.stat(cost_model)
        except OSError:
            return None
        return (cost_model, st.st_mtime_ns, st.st_size)
    if isinstance(cost_model, _core.CostModel):
        return ("profile", cost_model.fingerprint)
    if hasattr(cost_model, "__fspath__"):
        return _model_key(os.fspath(cost_model))
    return None


def _target_layout(x: DTensor, placements, shard_order) -> _core.Layout:
    if isinstance(placements, str):  # dtensor's own notation, e.g. "RS(0)" or "S(0)[1]S(0)[0]"
        if shard_order is not None:
            raise ValueError("shard_order= goes with a list of placements; the text form carries [k] positions itself")
        src = layout_of(x)
        return _core.Layout(src.mesh, list(src.shape), placements, dtype=src.dtype)
    return layout_of(x.device_mesh, placements, x.shape, x.dtype, shard_order)


def _placements_arg(placements):
    if isinstance(placements, str):
        return placements
    try:
        return tuple(placements)
    except TypeError:
        raise ValueError(f"placements: expected a sequence of torch placements or dtensor's text form, "
                         f"got {type(placements).__name__}") from None


def _call_for(x: DTensor, placements, shard_order, cost_model, cache) -> _Call:
    spec = x._spec
    device = x._local_tensor.device
    key = None
    if cache is None:
        mk = _model_key(cost_model)
        if mk is not None:
            try:
                key = (spec, spec.use_strided_shard_as_shard_order, placements, shard_order, mk, device)
                call = _calls.get(key)
            except TypeError:  # an unhashable argument (e.g. a shard order of lists): no caching
                key, call = None, None
            if call is not None and call.world is _default_group():
                return call
    src, dst = layout_of(x), _target_layout(x, placements, shard_order)
    plan = (cache if cache is not None else _cache).get(src, dst, cost_model)
    call = _Call(x.device_mesh, src, dst, plan, device)
    call.spec = _spec_of(x.device_mesh, dst)
    if key is not None:
        _remember(_calls, key, call)
    return call


def plan_for(x: DTensor, placements: Sequence, *, shard_order=None, cost_model: Any = "default",
             cache: Optional[_core.PlanCache] = None) -> _core.Plan:
    """The plan `redistribute(x, placements, ...)` would run, without running it."""
    if not isinstance(x, DTensor):
        raise ValueError(f"expected a torch DTensor, got {type(x).__name__}")
    src, dst = layout_of(x), _target_layout(x, _placements_arg(placements), shard_order)
    return (cache if cache is not None else _cache).get(src, dst, cost_model)


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
    return _batch_cache.get(pairs, cost_model)


# Batch plans by their pairs: a training loop moves the same tensors every step.
_batch_cache = _core.BatchPlanCache(256)


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
    runner = _runner(mesh, device)
    rank = runner.comm.rank
    ex = runner.batch_executor(batch)
    locals_, outs, wss = [], [], []
    plans = batch.plans  # per tensor (one conversion)
    for i, (x, p) in enumerate(zip(xs, plans)):
        local = x._local_tensor if x._local_tensor.is_contiguous() else x._local_tensor.contiguous()
        locals_.append(local.detach())
        outs.append(torch.empty(p.dst.local_shape(rank), dtype=x.dtype, device=device))
        wss.append(torch.empty(max(ex.workspace_bytes(i), 0), dtype=torch.uint8, device=device))
    staging = torch.empty(max(ex.staging_bytes, 0), dtype=torch.uint8, device=device)
    with runner.lock:
        runner.impl.set_buffers(*(t for t in locals_ + outs + wss + [staging] if t.numel() > 0))
        try:
            ex.execute([(a.data_ptr(), a.numel() * a.element_size(), b.data_ptr(), b.numel() * b.element_size(),
                         w.data_ptr(), w.numel()) for a, b, w in zip(locals_, outs, wss)],
                       staging.data_ptr(), staging.numel())
        finally:
            runner.impl.buffers = ()
            runner.impl.views = None
    return [DTensor(o, _spec_of(mesh, p.dst), requires_grad=False) for o, p in zip(outs, plans)]


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
            r.impl.set_buffers(*(t for t in (local, out, ws) if t.numel() > 0))
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


# ---------------------------------------------------------------- the drop-in switch

# where torch 2.15 calls redistribute_local_tensor: every module that imported it by name
_TORCH_MODULES = ("torch.distributed.tensor._redistribute", "torch.distributed.tensor._api",
                  "torch.distributed.tensor._dispatch", "torch.distributed.tensor.experimental._tp_transform")
_TESTED_TORCH = "2.15"
_P = inspect.Parameter
_TESTED_SIGNATURE = [("local_tensor", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                     ("current_spec", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                     ("target_spec", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                     ("async_op", _P.KEYWORD_ONLY, False),
                     ("use_graph_based_transform", _P.KEYWORD_ONLY, None),
                     ("is_explicit", _P.KEYWORD_ONLY, False)]
_MODELLED = (Shard, _StridedShard, Replicate, Partial)


class _Switch:
    def __init__(self):
        self.originals: dict = {}  # module -> torch's own function it held
        self.original = None
        self.cost_model: Any = "default"
        self.model_key: Any = "default"


_switch = _Switch()
_switch_lock = threading.RLock()
# routed calls by (source spec, target spec, cost model, device): a _Call, or the reason (str) to
# fall back to torch's function
_routes: dict = {}
_stats = {"routed": 0, "plan_cache_hits": 0, "plan_cache_misses": 0}
_fallbacks: dict = {}


def stats() -> dict:
    """What the switch did since the last reset_stats(): redistributions dtensor ran ("routed"),
    how many found their plan (and executor) cached, and the calls handed to torch's own
    function ("fallbacks", by reason)."""
    return {**_stats, "fallbacks": dict(_fallbacks)}


def reset_stats() -> None:
    for k in _stats:
        _stats[k] = 0
    _fallbacks.clear()


def is_enabled() -> bool:
    return _switch.original is not None


def _check_torch(fn) -> None:
    """The switch runs only on the torch it is tested with: its version (major.minor) and its
    redistribute_local_tensor's signature. torch 2.11 has the same signature, yet routing its
    x.redistribute through dtensor gave wrong shards for _StridedShard targets (its DTensorSpec
    fields mean other things), so a version check comes first."""
    version = ".".join(str(torch.__version__).split("+")[0].split(".")[:2])
    if version != _TESTED_TORCH:
        raise RuntimeError(
            f"dtensor.torch.enable(): torch {torch.__version__} is not torch {_TESTED_TORCH}, the version dtensor's "
            "switch is tested with (its redistribute_local_tensor and DTensorSpec may mean other things); "
            "use dtensor.torch.redistribute() instead")
    got = [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    if got != _TESTED_SIGNATURE:
        raise RuntimeError(
            f"dtensor.torch.enable(): torch {torch.__version__}'s redistribute_local_tensor{inspect.signature(fn)} "
            f"differs from torch {_TESTED_TORCH}'s, the version dtensor's switch is tested with; "
            "use dtensor.torch.redistribute() instead")


def enable(cost_model: Any = "default") -> None:
    """Routes torch's redistributions through dtensor: replaces torch's redistribute_local_tensor
    in every torch module that imported it, so explicit `x.redistribute(...)`, `full_tensor()`,
    the implicit redistributions of sharding propagation and their backward passes all run
    dtensor's plan (under `cost_model`) on torch.distributed. Layouts dtensor does not model,
    calls under torch.compile tracing or on fake/meta tensors, and ranks not on the mesh fall
    back to torch's own function (see stats()). RuntimeError on a torch other than the tested
    version (2.15), or whose function's signature differs from the tested one."""
    import importlib
    if isinstance(cost_model, (str, os.PathLike)) and os.fspath(cost_model) not in ("default", "pytorch"):
        _core.CostModel.load(os.fspath(cost_model))  # a bad profile fails here, naming it, not inside torch
    key = _model_key(cost_model)
    if key is None:
        raise TypeError(f"cost_model: expected \"default\", \"pytorch\", a profile path or a dtensor.CostModel, "
                        f"got {type(cost_model).__name__}")
    with _switch_lock:
        if _switch.original is None:
            base = importlib.import_module(_TORCH_MODULES[0])
            original = base.redistribute_local_tensor
            _check_torch(original)
            for name in _TORCH_MODULES:
                try:
                    mod = importlib.import_module(name)
                except ImportError:
                    continue
                if getattr(mod, "redistribute_local_tensor", None) is original:
                    _switch.originals[mod] = original
                    mod.redistribute_local_tensor = _routed
            _switch.original = original
        _switch.cost_model, _switch.model_key = cost_model, key


def disable() -> None:
    """Restores torch's own redistribute_local_tensor everywhere enable() replaced it."""
    with _switch_lock:
        for mod, fn in _switch.originals.items():
            mod.redistribute_local_tensor = fn
        _switch.originals.clear()
        _switch.original = None
        _switch.cost_model, _switch.model_key = "default", "default"


@contextlib.contextmanager
def enabled(cost_model: Any = "default"):
    """`with dtensor.torch.enabled(): ...`: enable() for the block; on leaving it (also by an
    exception) the switch is as it was before, torch's function restored if it was off."""
    with _switch_lock:
        was_on, before = is_enabled(), _switch.cost_model
        enable(cost_model)
    try:
        yield
    finally:
        with _switch_lock:
            if was_on:
                enable(before)
            else:
                disable()


def _fallback_reason(local_tensor: torch.Tensor, current_spec, target_spec) -> Optional[str]:
    """Why dtensor does not run this redistribution (None: it does); checked once per spec pair."""
    if current_spec.mesh != target_spec.mesh:
        return "mesh change"
    if not current_spec.mesh._is_current_rank_part_of_mesh():
        return "rank not on mesh"
    if local_tensor.device.type == "meta":
        return "meta tensor"
    for p in (*current_spec.placements, *target_spec.placements):
        if type(p) not in _MODELLED:
            return f"placement {type(p).__name__}"
    ops = {p.reduce_op for p in (*current_spec.placements, *target_spec.placements) if type(p) is Partial}
    if len(ops) > 1:
        return "mixed partial ops"
    if ops and next(iter(ops)) not in _REDUCE_OPS:
        return f"Partial({next(iter(ops))})"
    if current_spec.tensor_meta is None:
        return "no tensor meta"
    if current_spec.tensor_meta.dtype not in _TO_DTYPE:
        return f"dtype {current_spec.tensor_meta.dtype}"
    return None


def _spec_layout(spec: DTensorSpec) -> _core.Layout:
    meta = spec.tensor_meta
    order = None if spec.use_strided_shard_as_shard_order else spec.shard_order
    return layout_of(spec.mesh, spec.placements, meta.shape, meta.dtype, order)


def _route(local_tensor, current_spec, target_spec):
    """The _Call for this spec pair, or the reason to fall back."""
    reason = _fallback_reason(local_tensor, current_spec, target_spec)
    if reason is not None:
        return reason
    try:
        src = _spec_layout(current_spec)
        dst = layout_of(target_spec.mesh, target_spec.placements, current_spec.tensor_meta.shape,
                        current_spec.tensor_meta.dtype,
                        None if target_spec.use_strided_shard_as_shard_order else target_spec.shard_order)
    except ValueError as e:
        return f"layout ({str(e).splitlines()[0][:80]})"
    plan = _cache.get(src, dst, _switch.cost_model)
    return _Call(current_spec.mesh, src, dst, plan, local_tensor.device)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _named(e: Exception, current_spec, target_spec) -> Exception:
    """`e` with the placements, mesh and rank of the redistribution it came from."""
    rank = dist.get_rank() if dist.is_initialized() else "?"
    msg = (f"dtensor.torch: {list(current_spec.placements)} -> {list(target_spec.placements)} on "
           f"{current_spec.mesh}, rank {rank}: {e}")
    try:
        return type(e)(msg)
    except Exception:  # noqa: BLE001 - an exception type with another constructor
        return RuntimeError(msg)


def _routed(local_tensor, current_spec, target_spec, *, async_op=False, use_graph_based_transform=None,
            is_explicit=False):
    """torch's redistribute_local_tensor, run by dtensor (installed by enable())."""
    original = _switch.original
    if original is None:  # disabled while a reference to this function was held
        original = sys.modules[_TORCH_MODULES[0]].redistribute_local_tensor
        if original is _routed:
            raise RuntimeError("dtensor.torch: torch's redistribute_local_tensor is not known")
        return original(local_tensor, current_spec, target_spec, async_op=async_op,
                        use_graph_based_transform=use_graph_based_transform, is_explicit=is_explicit)
    if type(local_tensor) not in _PLAIN:
        reason = "tensor subclass"  # fake, functional, async-collective and other wrapper tensors
    elif _are_we_tracing():
        reason = "tracing"
    else:
        key = (current_spec, target_spec, current_spec.use_strided_shard_as_shard_order,
               target_spec.use_strided_shard_as_shard_order, _switch.model_key, local_tensor.device)
        call = _routes.get(key)
        if call is None or (type(call) is _Call and call.world is not _default_group()):
            _stats["plan_cache_misses"] += 1
            try:
                call = _route(local_tensor, current_spec, target_spec)
            except Exception as e:
                raise _named(e, current_spec, target_spec) from e
            _remember(_routes, key, call)
        elif type(call) is _Call:
            _stats["plan_cache_hits"] += 1
        if type(call) is _Call:
            if local_tensor.shape == call.src_shape:
                _stats["routed"] += 1
                try:
                    return call.run(local_tensor, bool(async_op))
                except Exception as e:
                    raise _named(e, current_spec, target_spec) from e
            reason = "uneven local shape"  # e.g. DTensor.from_local with shapes torch's rules do not give
        else:
            reason = call
    _fallbacks[reason] = _fallbacks.get(reason, 0) + 1
    return original(local_tensor, current_spec, target_spec, async_op=async_op,
                    use_graph_based_transform=use_graph_based_transform, is_explicit=is_explicit)
