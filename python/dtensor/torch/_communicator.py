"""dtensor's Communicator on torch.distributed: the collectives and copies the executor asks for."""

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
from . import _versions
from ._layout import _FROM_DTYPE, _REDUCE_OPS, _MeshInfo


# ---------------------------------------------------------------- execution

def _timeout_of(pg, device: torch.device):
    """The timeout a process group's backend for `device` runs with (None where torch hides it)."""
    try:
        options = pg._get_backend(device).options
    except Exception:  # noqa: BLE001 - a backend without options (MPI, a fake group): unknown
        return None
    return getattr(options, "timeout", None) or getattr(options, "_timeout", None)


def _set_timeout(timeout, pg) -> None:
    """A process group's timeout, where the running torch sets it (_versions: public_set_timeout)."""
    if _versions.current().public_set_timeout:
        dist.set_timeout(timeout, pg)
    else:
        from torch.distributed import distributed_c10d
        distributed_c10d._set_pg_timeout(timeout, pg)


def _error_text(err: BaseException) -> str:
    """A backend error as one line for a dtensor.BackendError: its type and its text, whitespace
    collapsed, at most 400 characters of it."""
    text = " ".join(str(err).split())
    if len(text) > 400:
        text = text[:400] + " ..."
    return f"{type(err).__name__}: {text}"


def run_p2p(ops: list, timeout) -> None:
    """Posts `ops` (torch.distributed P2POps) as one batch_isend_irecv and waits for each, within
    `timeout` (a timedelta; None: the process group's). RuntimeError when one fails or is not done
    in time: the caller names the peers."""
    for w in dist.batch_isend_irecv(ops):
        if timeout is None:
            w.wait()
        elif not w.wait(timeout):
            raise RuntimeError(f"not done after {timeout.total_seconds():g} s")


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
        raise _core.BackendError(f"dtensor.torch: {self.what}{where} failed on rank {c.my_rank} (peer ranks "
                                 f"{peers}): {_error_text(err)}") from err


class _TorchComm:
    """The collectives and (device) copies of dtensor's executor, on torch tensors.

    The executor's buffers arrive as (buffer index, offset) into the buffers of the current call
    (input, output, workspace; a batch's many), located by the C++ communicator; `_view` slices
    the uint8 view of that buffer.
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
        """The call's buffers (non-empty), in the order the C++ communicator numbers them
        (_Runner.set_buffers hands both sides the same list)."""
        # byte views are made on first use (a plan of local copies on CPU never asks for one)
        self.buffers = tensors
        self.views = None

    def _view(self, loc, nbytes: int) -> torch.Tensor:
        """The bytes [offset, offset + nbytes) of buffer `index` (loc = (index, offset), as the C++
        communicator locates the executor's addresses among the call's buffers)."""
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        if self.views is None:
            self.views = [t.reshape(-1).view(torch.uint8) for t in self.buffers]
        index, offset = loc
        b = self.views[index]
        if offset < 0 or offset + nbytes > b.numel():
            raise _core.BackendError(f"dtensor.torch: bytes [{offset}, {offset + nbytes}) are outside buffer {index} "
                                     f"({b.numel()} bytes)")
        return b[offset:offset + nbytes]

    def _typed(self, loc, count: int, dtype: str) -> torch.Tensor:
        td = _FROM_DTYPE[dtype]
        return self._view(loc, count * _core.itemsize(dtype)).view(td)

    # -- groups
    def _group(self, mesh_dims, dense_members=None) -> tuple:
        key = tuple(mesh_dims)
        g = self.groups.get(key)
        if g is not None:
            return g
        if dense_members is None:
            raise _core.BackendError(f"dtensor.torch: the group of mesh dims {list(key)} was not prepared (the "
                                     f"executor prepares every group its plan uses)")
        # members: this rank's group in member order, as the C++ communicator lists them (mesh ranks)
        members = [self.info.torch_ranks[int(d)] for d in dense_members]
        n = len(members)
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
        """groups: (mesh dims, the group's members as mesh ranks in member order) per group."""
        for dims, members in groups:
            self._group(dims, members)

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
        for peer, loc, count in sends:
            v = self._view(loc, count * size)
            if self.info.torch_ranks[peer] == self.my_rank:
                local_sends.append(v)
            elif count:
                ops.append(dist.P2POp(dist.isend, v, self.info.torch_ranks[peer]))
        for peer, loc, count in recvs:
            v = self._view(loc, count * size)
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

    def _strided(self, loc, run_bytes, count, stride) -> torch.Tensor:
        """The byte view `offset + sum(i_k * stride[k]) + j` (j < run_bytes) of loc's buffer, shape
        count + [run_bytes]. Negative strides (the executor fuses copies whose offsets step
        backwards) are taken from the lowest offset and flipped: a copy, so only for reading."""
        low = (loc[0], loc[1] + sum((c - 1) * st for c, st in zip(count, stride) if st < 0))
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
                dst = (dst[0], dst[1] + (c - 1) * ds[k])
                src = (src[0], src[1] + (c - 1) * ss[k])
                ds[k], ss[k] = -ds[k], -ss[k]
        self._strided(dst, run_bytes, count, ds).copy_(self._strided(src, run_bytes, count, ss))
