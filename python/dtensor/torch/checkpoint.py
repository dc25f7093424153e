"""Loading a DCP checkpoint into DTensors of any layout dtensor models (docs/checkpoint.md).

    import dtensor.torch.checkpoint as dck
    dck.load(state_dict, checkpoint_id="ckpt/")      # a checkpoint written by torch's dcp.save

Every saved chunk is read by exactly one rank (dtensor.plan_load: the reads balanced, a rank that
needs the bytes preferred), through DCP's own StorageReader (FileSystemReader by default), and
every rank then receives the elements its local shard holds from the chunk's reader, in one
batch of point-to-point transfers. Exact for every layout dtensor models, `_StridedShard`
targets included (DCP's default load is not: docs/torch-defects.md). Entries that are not
DTensors (plain tensors, non-tensor state) go through `dcp.load` unchanged.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from .. import _core
from ._layout import _dtype_name, _mesh_info, layout_of

__all__ = ["load", "plan"]


class _Capture:
    """The LoadPlanner side FileSystemReader.read_data calls: each read chunk into a fresh CPU tensor."""

    def __init__(self, dtypes: dict):
        self.dtypes = dtypes
        self.chunks: dict = {}

    def resolve_tensor(self, req):
        key = (req.storage_index.fqn, tuple(req.storage_index.offset))
        t = torch.empty(tuple(req.lengths), dtype=self.dtypes[req.storage_index.fqn])
        self.chunks[key] = t
        return t

    def commit_tensor(self, req, tensor) -> None:
        pass

    def load_bytes(self, req, value) -> None:  # (no byte items are asked for)
        raise AssertionError("dtensor.torch.checkpoint reads tensors only")


def _targets(state_dict: dict, metadata):
    """(fqn, DTensor, SavedTensor, Layout) for the DTensor entries, checked against the metadata."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    out = []
    mesh = None
    for fqn, x in state_dict.items():
        if not isinstance(x, DTensor):
            continue
        if mesh is None:
            mesh = x.device_mesh
        elif x.device_mesh is not mesh and _mesh_info(x.device_mesh).mesh != _mesh_info(mesh).mesh:
            raise ValueError(f"{fqn}: on device mesh {x.device_mesh}, the other DTensors on {mesh}: one mesh per load")
        md = metadata.state_dict_metadata.get(fqn)
        if md is None:
            raise ValueError(f"{fqn}: not in the checkpoint")
        if not isinstance(md, TensorStorageMetadata):
            raise ValueError(f"{fqn}: the checkpoint holds {type(md).__name__}, not a tensor")
        if md.properties.dtype != x.dtype:
            raise ValueError(f"{fqn}: saved as {md.properties.dtype}, the target is {x.dtype}")
        saved = _core.SavedTensor(fqn, list(md.size), _dtype_name(x.dtype),
                                  [(list(c.offsets), list(c.sizes)) for c in md.chunks])
        out.append((fqn, x, saved, layout_of(x)))
    return out, mesh


def plan(state_dict: dict, metadata, *, cost_model: Any = "default") -> Optional[_core.LoadPlan]:
    """The load plan of `state_dict`'s DTensors from a checkpoint's metadata (None without DTensors)."""
    targets, _ = _targets(state_dict, metadata)
    if not targets:
        return None
    return _core.plan_load([t[2] for t in targets], [t[3] for t in targets], cost_model)


def _positions(runs, lo: int, hi: int):
    """Of a rank's owned indices of one dim (runs in local order), the local positions and global
    indices inside [lo, hi), in local order: as (start, stop) pairs when they are one run each (a
    slice), else as index tensors."""
    pos, glob, base = [], [], 0
    for a, b in runs:
        s, e = max(a, lo), min(b, hi)
        if s < e:
            pos.append((base + s - a, base + e - a))
            glob.append((s, e))
        base += b - a
    if len(pos) == 1:
        return pos[0], glob[0]
    return (torch.tensor([i for p in pos for i in range(*p)], dtype=torch.long),
            torch.tensor([i for g in glob for i in range(*g)], dtype=torch.long))


def _count(x) -> int:
    return x[1] - x[0] if isinstance(x, tuple) else len(x)


def _advanced(index: list) -> tuple:
    """The advanced-index tuple selecting the cartesian product of per-dim positions (each
    (start, stop) or an index tensor)."""
    full = [torch.arange(ix[0], ix[1]) if isinstance(ix, tuple) else ix for ix in index]
    nd = len(full)
    return tuple(ix.view([-1 if d == k else 1 for d in range(nd)]) for k, ix in enumerate(full))


def _select(t: torch.Tensor, index: list, shift: list) -> torch.Tensor:
    """The box of `t` at per-dim positions `index` less `shift`: a view when every dim is one run,
    else a gathered copy."""
    if all(isinstance(ix, tuple) for ix in index):
        return t[tuple(slice(a - o, b - o) for (a, b), o in zip(index, shift))]
    return t[_advanced([(ix[0] - o, ix[1] - o) if isinstance(ix, tuple) else ix - o for ix, o in zip(index, shift)])]


def _place(t: torch.Tensor, index: list, value: torch.Tensor) -> None:
    """Writes `value` into the box of `t` at per-dim positions `index`."""
    if all(isinstance(ix, tuple) for ix in index):
        t[tuple(slice(a, b) for a, b in index)].copy_(value)
    else:
        t[_advanced(index)] = value


def load(state_dict: dict, *, checkpoint_id=None, storage_reader=None, cost_model: Any = "default",
         read_bw_GBps: float = 2.0, read_alpha_us: float = 100.0) -> Optional[_core.LoadPlan]:
    """Loads a checkpoint written by `dcp.save` into `state_dict` in place (as `dcp.load` does):
    its DTensors through dtensor's load plan, anything else through `dcp.load`. Every rank of the
    default process group calls it with the same keys. Returns the plan (None without DTensors).
    ValueError for a key the checkpoint lacks or holds with another dtype or shape, for metadata
    whose chunks do not tile a tensor (naming the tensor and chunk), or DTensors on several meshes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, ReadItem

    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, not {type(state_dict).__name__}")
    if storage_reader is None:
        if checkpoint_id is None:
            raise ValueError("load needs checkpoint_id or storage_reader")
        storage_reader = FileSystemReader(checkpoint_id)
    if not dist.is_initialized():
        raise ValueError("dtensor.torch.checkpoint.load runs on every rank of a process group (DCP's no-collectives "
                         "path is not supported: call dist.init_process_group first)")
    metadata = storage_reader.read_metadata()
    targets, mesh = _targets(state_dict, metadata)
    rest = {k: v for k, v in state_dict.items() if not isinstance(v, DTensor)}
    if rest:
        dcp.load(rest, checkpoint_id=checkpoint_id, storage_reader=None if checkpoint_id is not None else storage_reader)
        state_dict.update(rest)
    if not targets:
        return None
    lp = _core.plan_load([t[2] for t in targets], [t[3] for t in targets], cost_model, read_bw_GBps, read_alpha_us)
    info = _mesh_info(mesh)
    me = info.dense[dist.get_rank()]
    device = targets[0][1]._local_tensor.device
    # every rank planned the same (deterministic); check it before anything moves
    h = torch.tensor([lp.hash & ((1 << 62) - 1)], dtype=torch.int64, device=device)
    lo, hi = h.clone(), h.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    if int(lo) != int(hi):
        raise _core.BackendError("dtensor.torch.checkpoint.load: the ranks planned different loads (different "
                                 "state_dict layouts or metadata on some rank)")
    # 1. this rank's reads, through DCP's storage reader
    storage_reader.set_up_storage_reader(metadata, dist.get_rank() == 0)
    items = []
    for t, c, reader, _ in lp.reads:
        if reader != me:
            continue
        fqn, saved = targets[t][0], targets[t][2]
        offsets, sizes = saved.chunks[c]
        index = MetadataIndex(fqn, torch.Size(offsets), c)
        zeros = torch.Size([0] * len(offsets))
        items.append(ReadItem(type=LoadItemType.TENSOR, dest_index=index, dest_offsets=zeros, storage_index=index,
                              storage_offsets=zeros, lengths=torch.Size(sizes)))
    capture = _Capture({fqn: x.dtype for fqn, x, _, _ in targets})
    if items:
        storage_reader.read_data(LoadPlan(items), capture).wait()
    # 2. the moves: every message of this rank, as bytes, in one batch
    outs = [x._local_tensor if x._local_tensor.is_contiguous() else x._local_tensor.contiguous() for _, x, _, _ in targets]
    runs_cache: dict = {}

    def cut(t: int, c: int, to: int):
        key = (t, to)
        if key not in runs_cache:
            runs_cache[key] = targets[t][3].owned_runs(to)
        offsets, sizes = targets[t][2].chunks[c]
        return [_positions(r, o, o + s) for r, o, s in zip(runs_cache[key], offsets, sizes)]

    ops, pending = [], []
    for t, c, frm, to, elements in lp.messages:
        if frm != me and to != me:
            continue
        fqn, x = targets[t][0], targets[t][1]
        offsets, _ = targets[t][2].chunks[c]
        parts = cut(t, c, to)
        shape = [_count(p[0]) for p in parts]
        if frm == me:
            chunk = capture.chunks[(fqn, tuple(offsets))]
            piece = _select(chunk, [g for _, g in parts], offsets).to(device)
            if to == me:
                _place(outs[t], [p for p, _ in parts], piece.reshape(shape))
            else:
                buf = piece.contiguous().view(torch.uint8)
                ops.append(dist.P2POp(dist.isend, buf, info.torch_ranks[to]))
        else:
            buf = torch.empty(elements * x.element_size(), dtype=torch.uint8, device=device)
            ops.append(dist.P2POp(dist.irecv, buf, info.torch_ranks[frm]))
            pending.append((t, parts, shape, buf))
    if ops:
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    for t, parts, shape, buf in pending:
        _place(outs[t], [p for p, _ in parts], buf.view(targets[t][1].dtype).reshape(shape))
    for (_, x, _, _), out in zip(targets, outs):
        if out is not x._local_tensor:
            x._local_tensor.copy_(out)
    return lp
