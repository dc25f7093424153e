"""Redistributions inside a traced region (torch.compile, make_fx): dtensor's plan as traceable ops.

Under tracing the local tensor is a FakeTensor (dynamo) or a FunctionalTensor (AOTAutograd), so
the eager executor, which moves bytes at addresses, cannot run. The plan does not need the data:
it is a pure function of the two specs, made on the host as in eager mode. The executor of that
plan then runs once against a recording communicator (`_Recorder`): with its copies on the torch
side, every copy, fill and collective is a call into Python naming (buffer, offset) and sizes,
and no memory is touched (the buffers are address ranges that hold nothing). `_replay` performs
the recorded program on the traced tensors: copies as slices, strided views and `copy_` on byte
views of the input, output and workspace, and collectives as functional collectives
(torch.distributed._functional_collectives), whose waits the compiler may move:

  all_gather -> all_gather_tensor, reduce_scatter -> reduce_scatter_tensor, all_reduce ->
  all_reduce, all_to_all -> all_to_all_single (members reordered where the process group ranks
  them otherwise), and a `direct` step (grouped send/recv; funcol has none) -> one
  all_to_all_single over the step's group with split sizes, zero for non-peers, called by every
  member (every rank of the mesh runs every direct step).

The eager executor and the replay run the same program, so their results are the same bits. The
ranks' plan hashes are not compared at trace time (no collective outside the graph); plans are
the same on every rank because they are pure functions of the specs.
"""

from __future__ import annotations

import itertools
from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.utils._python_dispatch import _disable_current_modes

from .. import _core
from ._layout import _FROM_DTYPE


class _Recorder:
    """The communicator interface of dtensor.torch (_TorchComm's), recording instead of moving."""

    def __init__(self, supports):
        self._supports = supports
        self.ops: list = []
        self.groups: dict = {}

    def prepare(self, groups) -> None:
        for dims, members in groups:
            self.groups[tuple(dims)] = [int(m) for m in members]

    def supports(self, kind, dtype, op) -> bool:
        return self._supports(kind, dtype, op)

    def exchange(self, value):
        raise _core.BackendError("dtensor.torch: no plan-hash exchange inside a traced region")

    def all_gather(self, mesh_dims, send, recv, count, dtype):
        self.ops.append(("all_gather", tuple(mesh_dims), send, recv, count, dtype, None))

    def reduce_scatter(self, mesh_dims, send, recv, count, dtype, op):
        self.ops.append(("reduce_scatter", tuple(mesh_dims), send, recv, count, dtype, op))

    def all_reduce(self, mesh_dims, send, recv, count, dtype, op):
        self.ops.append(("all_reduce", tuple(mesh_dims), send, recv, count, dtype, op))

    def all_to_all(self, mesh_dims, send, recv, count, dtype):
        self.ops.append(("all_to_all", tuple(mesh_dims), send, recv, count, dtype, None))

    def send_recv(self, sends, recvs, dtype):
        self.ops.append(("send_recv", [tuple(s) for s in sends], [tuple(r) for r in recvs], dtype))

    def synchronize(self):
        pass

    def copy(self, dst, src, nbytes):
        self.ops.append(("copy", dst, src, nbytes))

    def fill(self, dst, dtype, count, value):
        self.ops.append(("fill", dst, dtype, count, value))

    def copy_strided(self, dst, src, run_bytes, count, dst_stride, src_stride):
        self.ops.append(("copy_strided", dst, src, run_bytes, list(count), list(dst_stride), list(src_stride)))


_UNITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# address ranges the recording run names its buffers by (never dereferenced)
_BASES = (1 << 44, 2 << 44, 3 << 44)


class _Program:
    """One rank's recorded program of a plan: what `_replay` performs, and the groups it needs."""

    __slots__ = ("ops", "groups", "direct_dims", "buffers", "out_shape", "workspace")

    def __init__(self, plan: _core.Plan, mesh: _core.Mesh, rank: int, supports):
        rec = _Recorder(supports)
        comm = _core._PyCommunicator(mesh, rank, rec, False)
        ex = _core._Executor(plan, comm, False, False)
        sizes = (ex.input_bytes, ex.output_bytes, ex.workspace_bytes)
        # the buffers the C++ side can locate: the non-empty ones, in this order (as _Runner's)
        self.buffers = [k for k in range(3) if sizes[k] > 0]
        comm._set_buffers([(_BASES[k], sizes[k]) for k in self.buffers])
        ex.execute(_BASES[0], sizes[0], _BASES[1], sizes[1], _BASES[2], sizes[2])
        self.ops, self.groups = rec.ops, rec.groups
        self.workspace = sizes[2]
        self.out_shape = list(plan.dst.local_shape(rank))
        # each direct step's group: the mesh dims its source shards (the peers the executor
        # exchanges with, src/comm/executor.cpp: lower_direct), in plan order
        self.direct_dims = []
        for st in plan.steps:
            if st.kind == "direct":
                lay = _core.Layout(plan.src.mesh, list(plan.src.shape), st.src, dtype=plan.src.dtype)
                self.direct_dims.append(tuple(m for m, p in enumerate(lay.placements)
                                              if p.kind in ("shard", "strided_shard")))


def _members(mesh: _core.Mesh, rank: int, dims) -> list:
    """The mesh ranks of `rank`'s group over `dims`: row-major over dims, the last fastest
    (src/placement/groups.hpp, the order every backend ranks a group's members in)."""
    coord = list(mesh.coord_of(rank))
    out = []
    for digits in itertools.product(*[range(mesh.shape[m]) for m in dims]):
        c = list(coord)
        for m, v in zip(dims, digits):
            c[m] = v
        out.append(mesh.rank_at(c))
    return out


class _Groups:
    """Process groups for a replay, from the runner's communicator (created outside the trace)."""

    def __init__(self, impl, mesh: _core.Mesh, rank: int):
        self.impl, self.mesh, self.rank = impl, mesh, rank

    def get(self, dims, members=None):
        """(process group, its torch ranks in group order, order or None: the member position of
        each group rank)."""
        if members is None:
            members = _members(self.mesh, self.rank, dims)
        with _disable_current_modes():  # a real group (and permutation), not a traced one
            pg, n, perm, _ = self.impl._group(dims, members)
            order = None if perm is None else [int(v) for v in perm.cpu().tolist()]
            ranks = dist.get_process_group_ranks(pg)
        return pg, ranks, order


def _replay(prog: _Program, groups: _Groups, local: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The program on traced (or real) tensors: the output tensor of the target layout."""
    device = local.device
    out = torch.empty(prog.out_shape, dtype=dtype, device=device)
    ws = torch.empty(prog.workspace, dtype=torch.uint8, device=device)
    whole = (local.contiguous(), out, ws)
    views = [whole[k].reshape(-1).view(torch.uint8) for k in prog.buffers]

    def at(loc, nbytes):
        index, offset = loc
        return views[index].narrow(0, offset, nbytes)

    def typed(loc, count, dt):
        return at(loc, count * _core.itemsize(dt)).view(_FROM_DTYPE[dt])

    def boxed(loc, run, count, stride, unit):
        """(the buffer in `unit`-byte words, the word index of every word of the box: shape count +
        [run / unit]), built from aranges in the graph. Strided views (as_strided) cannot be
        written through under functionalization; an index can."""
        words = views[loc[0]].view(_UNITS[unit])
        idx = torch.arange(run // unit, device=device) + loc[1] // unit
        for k in reversed(range(len(count))):
            idx = (torch.arange(count[k], device=device) * (stride[k] // unit)).view(-1, *([1] * idx.dim())) + idx
        return words, idx

    def rows(t, n, order):  # rows of t (n of them) in the order `order` lists them
        width = t.numel() // n
        return torch.cat([t.narrow(0, j * width, width) for j in order]) if n else t

    direct = iter(prog.direct_dims)
    for op in prog.ops:
        kind = op[0]
        if kind == "copy":
            _, dst, src, nbytes = op
            if nbytes:
                at(dst, nbytes).copy_(at(src, nbytes).clone() if dst[0] == src[0] else at(src, nbytes))
        elif kind == "fill":
            _, dst, dt, count, value = op
            if count:
                typed(dst, count, dt).fill_(value)
        elif kind == "copy_strided":
            _, dst, src, run, count, ds, ss = op
            if run == 0 or any(c == 0 for c in count):
                continue
            # the widest word that divides every offset, stride and size involved
            sizes = [run, dst[1], src[1], views[dst[0]].numel(), views[src[0]].numel(), *ds, *ss]
            unit = next(u for u in (8, 4, 2, 1) if all(v % u == 0 for v in sizes))
            swords, sidx = boxed(src, run, count, ss, unit)
            dwords, didx = boxed(dst, run, count, ds, unit)
            dwords.index_put_((didx.reshape(-1),), swords[sidx.reshape(-1)])
        elif kind == "send_recv":
            _, sends, recvs, dt = op
            _exchange(groups, next(direct), sends, recvs, dt, at, device)
        else:
            _, dims, send, recv, count, dt, red = op
            _collective(groups, prog.groups.get(dims), kind, dims, send, recv, count, dt, red, at, typed, rows)
    return out


def _collective(groups, members, kind, dims, send, recv, count, dt, red, at, typed, rows):
    pg, ranks, order = groups.get(dims, members)
    n = len(ranks)
    if count == 0:
        return
    nb = count * _core.itemsize(dt)
    if kind == "all_gather":
        g = funcol.all_gather_tensor(at(send, nb), 0, pg)
        if order is not None:  # group rank j holds member order[j]: put member m's row at m
            g = rows(g, n, [order.index(m) for m in range(n)])
        at(recv, nb * n).copy_(g)
    elif kind == "reduce_scatter":
        s = typed(send, count * n, dt)
        if order is not None:  # group rank j gets member order[j]'s row
            s = rows(s, n, order)
        typed(recv, count, dt).copy_(funcol.reduce_scatter_tensor(s, red, 0, pg))
    elif kind == "all_reduce":
        typed(recv, count, dt).copy_(funcol.all_reduce(typed(send, count, dt), red, pg))
    elif kind == "all_to_all":
        s = at(send, nb * n)
        if order is not None:
            s = rows(s, n, order)
        r = funcol.all_to_all_single(s, None, None, pg)
        if order is not None:
            r = rows(r, n, [order.index(m) for m in range(n)])
        at(recv, nb * n).copy_(r)
    else:
        raise _core.BackendError(f"dtensor.torch: no traced lowering of {kind}")


def _exchange(groups, dims, sends, recvs, dt, at, device):
    """A direct step's grouped send/recv as one all_to_all_single over the step's group: per
    group rank the bytes to it (the sends to one peer in order, matched in order by its receives,
    as point-to-point messages between two ranks are), zero for non-peers."""
    size = _core.itemsize(dt)
    pg, ranks, _ = groups.get(dims)
    info = groups.impl.info
    me = groups.impl.my_rank
    pos = {r: j for j, r in enumerate(ranks)}
    outgoing = [[] for _ in ranks]
    local = []
    for peer, loc, count in sends:
        v = at(loc, count * size)
        if info.torch_ranks[peer] == me:
            local.append(v)
        elif count:
            outgoing[pos[info.torch_ranks[peer]]].append(v)
    incoming = [[] for _ in ranks]
    for peer, loc, count in recvs:
        v = at(loc, count * size)
        if info.torch_ranks[peer] == me:
            v.copy_(local.pop(0))
        elif count:
            incoming[pos[info.torch_ranks[peer]]].append(v)
    send_splits = [sum(v.numel() for v in vs) for vs in outgoing]
    recv_splits = [sum(v.numel() for v in vs) for vs in incoming]
    flat = [v for vs in outgoing for v in vs]
    payload = torch.cat(flat) if flat else torch.empty(0, dtype=torch.uint8, device=device)
    got = funcol.all_to_all_single(payload, recv_splits, send_splits, pg)
    offset = 0
    for vs in incoming:
        for v in vs:
            v.copy_(got.narrow(0, offset, v.numel()))
            offset += v.numel()


def traced(call_key, plan: _core.Plan, runner, local: torch.Tensor, cache: dict, remember, recall) -> torch.Tensor:
    """The redistribution of `local` (of the source layout's local shape: the caller checks it)
    under `plan`, as traceable torch ops (see the module's text). Programs are kept per call key
    in `cache`."""
    prog = recall(cache, call_key)
    if prog is None:
        prog = _Program(plan, runner.info.mesh, runner.comm.rank, runner.impl.supports)
        remember(cache, call_key, prog)
    return _replay(prog, _Groups(runner.impl, runner.info.mesh, runner.comm.rank), local, local.dtype)


def is_capture() -> bool:
    """Whether a graph is being captured now (make_fx's proxy mode: AOTAutograd's trace), as
    opposed to dynamo's or AOT's passes that only propagate fake values."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode
    return get_proxy_mode() is not None


def traceable(local: torch.Tensor) -> Optional[str]:
    """None when `local` can take the traced lowering, else why not."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor
    if type(local) not in (torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor):
        return "tensor subclass"
    if any(not isinstance(s, int) for s in local.shape):
        return "symbolic shape"
    return None
