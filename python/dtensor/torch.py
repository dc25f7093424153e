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
collective. It is not differentiable: call it on tensors that do not require grad, or under
``torch.no_grad()``.
"""
from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
from torch.distributed.tensor.placement_types import _StridedShard

from . import _core

__all__ = ["layout_of", "placements_of", "distribute", "redistribute", "plan_for", "clear_caches"]

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


def _spec_of(device_mesh, layout: _core.Layout) -> DTensorSpec:
    placements, order = placements_of(layout)
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
        self.whole = None
        self.buffers: list[torch.Tensor] = []

    # -- buffers
    def set_buffers(self, *tensors: torch.Tensor) -> None:
        self.buffers = [t.reshape(-1).view(torch.uint8) for t in tensors if t.numel() > 0]

    def _view(self, address: int, nbytes: int) -> torch.Tensor:
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        for b in self.buffers:
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
                dist.set_timeout(world_timeout, pg)
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
        return g

    def prepare(self, groups) -> None:
        for dims in groups:
            self._group(dims)

    def supports(self, kind: str, dtype: str, op: str) -> bool:
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
        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        dist.all_gather_into_tensor(out, t, group=self.whole)
        return [int(v) for v in out.cpu().tolist()]  # group rank order == ascending torch rank == dense id

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
            collective(recv, send, group=pg)
            return
        tmp = torch.empty_like(recv)
        collective(tmp, send, group=pg)
        recv.view(n, width)[perm] = tmp.view(n, width)

    def all_gather(self, mesh_dims, send, recv, count, dtype) -> None:
        pg, n, perm, _ = self._group(mesh_dims)
        nb = count * _core.itemsize(dtype)
        s, r = self._view(send, nb), self._view(recv, nb * n)
        if nb == 0:
            return
        if self._overlaps(s, r):
            s = s.clone()
        self._into_members(dist.all_gather_into_tensor, r, s, n, nb, perm, pg)

    def reduce_scatter(self, mesh_dims, send, recv, count, dtype, op) -> None:
        pg, n, perm, _ = self._group(mesh_dims)
        if count == 0:
            return
        s, r = self._typed(send, count * n, dtype), self._typed(recv, count, dtype)
        if perm is not None:
            s = s.view(n, count)[perm].reshape(-1)
        elif self._overlaps(s, r):
            s = s.clone()
        dist.reduce_scatter_tensor(r, s, op=_REDUCE_OPS[op], group=pg)

    def all_reduce(self, mesh_dims, send, recv, count, dtype, op) -> None:
        pg, _, _, _ = self._group(mesh_dims)
        if count == 0:
            return
        s, r = self._typed(send, count, dtype), self._typed(recv, count, dtype)
        if s.data_ptr() != r.data_ptr():
            r.copy_(s)
        dist.all_reduce(r, op=_REDUCE_OPS[op], group=pg)

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
        self._into_members(dist.all_to_all_single, r, s, n, nb, perm, pg)

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
            for req in dist.batch_isend_irecv(ops):
                req.wait()

    def synchronize(self) -> None:
        pass  # collectives above are issued synchronously (CPU) or ordered on the current stream (GPU)

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


# For tests: run the executor's local copies as torch ops (the GPU path) on CPU tensors too.
_torch_local_copies_on_cpu = False


class _Runner:
    def __init__(self, device_mesh: DeviceMesh, device: torch.device, host_copies: bool):
        self.host_copies = host_copies
        self.info = _mesh_info(device_mesh)
        self.impl = _TorchComm(device_mesh, self.info, device)
        self.comm = _core._PyCommunicator(self.info.mesh, self.info.dense[self.impl.my_rank], self.impl, host_copies)
        self.executors: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def executor(self, plan: _core.Plan):
        key = (plan.hash, str(plan.src), str(plan.dst), plan.cost_model)
        ex = self.executors.get(key)
        if ex is None:
            ex = _core._Executor(plan, self.comm)
            self.executors[key] = ex
            if len(self.executors) > 256:
                self.executors.popitem(last=False)
        else:
            self.executors.move_to_end(key)
        return ex


_cache = _core.PlanCache(4096)
_runners: dict[tuple, _Runner] = {}
_runners_lock = threading.Lock()


def clear_caches() -> None:
    """Forgets cached plans, executors and process groups (e.g. after destroy_process_group)."""
    _cache.clear()
    with _runners_lock:
        _runners.clear()
    with _mesh_lock:
        _meshes.clear()


# release executors and communicators before the interpreter tears the extension down
atexit.register(clear_caches)


def _runner(device_mesh: DeviceMesh, device: torch.device) -> _Runner:
    host_copies = device.type == "cpu" and not _torch_local_copies_on_cpu
    key = (id(device_mesh), str(device), id(dist.distributed_c10d._get_default_group()), host_copies)
    with _runners_lock:
        r = _runners.get(key)
        if r is None or r.impl.device_mesh is not device_mesh:
            r = _Runner(device_mesh, device, host_copies)
            _runners[key] = r
        return r


def _target_layout(x: DTensor, placements, shard_order) -> _core.Layout:
    if not isinstance(x, DTensor):
        raise ValueError(f"expected a torch DTensor, got {type(x).__name__}")
    if isinstance(placements, str):  # dtensor's own notation, e.g. "RS(0)" or "S(0)[1]S(0)[0]"
        if shard_order is not None:
            raise ValueError("shard_order= goes with a list of placements; the text form carries [k] positions itself")
        src = layout_of(x)
        return _core.Layout(src.mesh, list(src.shape), placements, dtype=src.dtype)
    return layout_of(x.device_mesh, placements, x.shape, x.dtype, shard_order)


def plan_for(x: DTensor, placements: Sequence, *, shard_order=None, cost_model: Any = "default",
             cache: Optional[_core.PlanCache] = None) -> _core.Plan:
    """The plan `redistribute(x, placements, ...)` would run, without running it."""
    src, dst = layout_of(x), _target_layout(x, placements, shard_order)
    return (cache if cache is not None else _cache).get(src, dst, cost_model)


def redistribute(x: DTensor, placements: Sequence, *, shard_order=None, cost_model: Any = "default",
                 cache: Optional[_core.PlanCache] = None) -> DTensor:
    """x redistributed to `placements` (and `shard_order`), as a new DTensor on the same mesh.

    dtensor plans the cheapest sequence of steps under `cost_model` ("default", "pytorch", a
    profile path or a dtensor.CostModel), the same plan on every rank; plans are cached per
    (layouts, cost model) in `cache` (a dtensor.PlanCache; a module-wide one by default).
    """
    if x.requires_grad and torch.is_grad_enabled():
        raise ValueError("dtensor.torch.redistribute is not differentiable: call it under torch.no_grad() "
                         "or on x.detach()")
    src, dst = layout_of(x), _target_layout(x, placements, shard_order)
    plan = (cache if cache is not None else _cache).get(src, dst, cost_model)
    local = x._local_tensor.contiguous()
    runner = _runner(x.device_mesh, local.device)
    rank = runner.comm.rank
    out = torch.empty(dst.local_shape(rank), dtype=local.dtype, device=local.device)
    if list(local.shape) != list(src.local_shape(rank)):
        raise ValueError(f"rank {dist.get_rank()}: local tensor of shape {list(local.shape)}, but the layout "
                         f"{src} gives this rank {src.local_shape(rank)}")
    with runner.lock:
        ex = runner.executor(plan)
        workspace = torch.empty(max(ex.workspace_bytes, 0), dtype=torch.uint8, device=local.device)
        runner.impl.set_buffers(local, out, workspace)
        try:
            ex.execute(local.data_ptr(), local.numel() * local.element_size(), out.data_ptr(),
                       out.numel() * out.element_size(), workspace.data_ptr(), workspace.numel())
        finally:
            runner.impl.buffers = []
    return DTensor(out, _spec_of(x.device_mesh, dst), requires_grad=False)
