"""Saving DTensors with DCP as the boxes each rank really holds (docs/checkpoint.md).

torch's DCP describes a rank's local shard as one box (one offset and size per dim, from
compute_local_shape_and_global_offset). A `_StridedShard` shard, or a shard-order layout torch
lays out differently, is several boxes: DCP's coordinator then refuses the plan ("overlapping
chunks") or records the wrong elements. This planner asks dtensor's layout for the rank's owned
runs per dim and, where they are not exactly DCP's one box, writes one chunk per box of those runs
(coalesced), read straight out of the local tensor. Every other entry -- DTensors DCP already
describes right, plain tensors, non-tensor state -- takes DCP's default path unchanged. What it
writes is an ordinary DCP checkpoint: `dcp.load` reads it into Shard/Replicate targets and plain
tensors, `dtensor.torch.checkpoint.load` into any layout.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex, TensorProperties
from torch.distributed.checkpoint.planner import TensorWriteData, WriteItem, WriteItemType
from torch.distributed.tensor import DTensor

from ._layout import _mesh_info, layout_of

_KEY = "__dtensor_save__"  # this planner's entry in a local plan's planner_data (taken out on the coordinator)


def _describe(obj: Any) -> str:
    if isinstance(obj, DTensor):
        return f"a DTensor of shape {list(obj.shape)} and dtype {obj.dtype}"
    return f"a {type(obj).__name__}"


def _boxes(x: DTensor) -> Optional[list]:
    """The boxes this rank's local shard of `x` holds: [(offsets, sizes, local slices)], from the
    layout's owned runs per dim (each dim's runs in local order, neighbours coalesced); [] when it
    holds nothing, None when it is not on the mesh."""
    info = _mesh_info(x.device_mesh)
    if dist.get_rank() not in info.dense:
        return None
    _, coord = info.my_coord()
    runs = layout_of(x).owned_runs(coord)
    per_dim = []
    for dim_runs in runs:
        merged, pos = [], 0
        for a, b in dim_runs:
            if b <= a:
                continue
            if merged and merged[-1][1] == a:
                merged[-1][1] = b
            else:
                merged.append([a, b, pos])
            pos += b - a
        per_dim.append(merged)
    if any(not m for m in per_dim):
        return []
    out = []
    for combo in itertools.product(*per_dim):
        out.append(([a for a, _, _ in combo], [b - a for a, b, _ in combo],
                    tuple(slice(p, p + b - a) for a, b, p in combo)))
    return out


class SavePlanner(DefaultSavePlanner):
    """DCP's default save planner, except for DTensors whose local shard is not the one box DCP
    would record: those are written as the boxes the rank holds. `process_group`: the group
    dcp.save runs on (None: the default group); a DTensor whose mesh holds a rank outside it is
    refused. Ranks whose state dicts disagree on a DTensor entry (another shape or dtype, or a
    non-tensor value under its key) are refused on every rank, naming them."""

    def __init__(self, *, process_group=None, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 dedup_save_to_lowest_rank: bool = False) -> None:
        super().__init__(flatten_state_dict=flatten_state_dict, flatten_sharded_tensors=flatten_sharded_tensors,
                         dedup_save_to_lowest_rank=dedup_save_to_lowest_rank)
        if process_group is not None and not isinstance(process_group, dist.ProcessGroup):
            raise TypeError(f"process_group must be a torch.distributed.ProcessGroup or None, not "
                            f"{type(process_group).__name__}")
        self.process_group = process_group
        self._data: dict = {}  # (fqn, offsets) -> (DTensor, local slices) of the boxes written here
        self.boxed: list = []  # the keys this rank wrote as boxes

    def create_local_plan(self):
        plan = super().create_local_plan()
        group = self.process_group
        members = set(dist.get_process_group_ranks(group)) if group is not None else set(range(dist.get_world_size()))
        self._data, self.boxed = {}, []
        items = []
        for item in plan.items:
            fqn = item.index.fqn
            x = self.state_dict.get(fqn)
            if not isinstance(x, DTensor) or item.tensor_data is None:
                items.append(item)
                continue
            outside = sorted(set(_mesh_info(x.device_mesh).torch_ranks) - members)
            if outside:
                raise ValueError(f"dtensor.torch.checkpoint.save: {fqn!r} lives on the device mesh "
                                 f"{x.device_mesh}, whose ranks {outside[:8]} are not in the save's process group")
            boxes = _boxes(x)
            if x.numel() == 0 or boxes is None:
                items.append(item)  # an empty tensor, or a rank off the mesh: as DCP records it
                continue
            chunk = item.tensor_data.chunk
            local = x._local_tensor
            if (len(boxes) == 1 and list(boxes[0][0]) == list(chunk.offsets) and list(boxes[0][1]) == list(chunk.sizes)
                    and list(local.shape) == list(chunk.sizes)):
                items.append(item)  # DCP's one box is what the rank holds: its default path
                continue
            self.boxed.append(fqn)
            props = TensorProperties.create_from_tensor(local)
            for offsets, sizes, slices in boxes:  # (an empty shard writes nothing: the others cover the tensor)
                index = MetadataIndex(fqn, torch.Size(offsets))
                self._data[(fqn, tuple(offsets))] = (x, slices)
                items.append(WriteItem(index=index, type=WriteItemType.SHARD, tensor_data=TensorWriteData(
                    chunk=ChunkStorageMetadata(offsets=torch.Size(offsets), sizes=torch.Size(sizes)),
                    properties=props, size=x.size())))
        seen = {fqn: _describe(v) for fqn, v in self.state_dict.items()}
        data = dict(plan.planner_data) if isinstance(plan.planner_data, dict) else {}
        data[_KEY] = {"rank": dist.get_rank(), "entries": seen,
                      "dtensors": sorted(k for k, v in self.state_dict.items() if isinstance(v, DTensor))}
        plan = dataclasses.replace(plan, items=items, planner_data=data)
        self.plan = plan
        return plan

    def create_global_plan(self, all_plans: list):
        entries, stripped = [], []
        for p in all_plans:
            data = dict(p.planner_data) if isinstance(p.planner_data, dict) else {}
            entries.append(data.pop(_KEY, None))
            stripped.append(dataclasses.replace(p, planner_data=data if (data or self.flatten_state_dict) else None))
        if any(e is None for e in entries):
            raise ValueError("dtensor.torch.checkpoint.SavePlanner: some rank's local plan was not made by a dtensor "
                             "SavePlanner (every rank passes one)")
        for fqn in sorted({k for e in entries for k in e["dtensors"]}):
            want = next(e for e in entries if fqn in e["dtensors"])
            odd = [e["rank"] for e in entries if e["entries"].get(fqn) != want["entries"][fqn]]
            if odd:
                what = sorted({e["entries"].get(fqn, "nothing") for e in entries if e["rank"] in odd})
                raise ValueError(f"dtensor.torch.checkpoint.save: ranks {odd[:8]} hold {' or '.join(what)} under "
                                 f"{fqn!r}, where rank {want['rank']} holds {want['entries'][fqn]} (every rank "
                                 f"passes the same DTensor entries)")
        return super().create_global_plan(stripped)

    def resolve_data(self, write_item):
        hit = self._data.get((write_item.index.fqn, tuple(write_item.index.offset or ())))
        if hit is None:
            return super().resolve_data(write_item)
        x, slices = hit
        return x._local_tensor.detach()[slices].contiguous()


def save(state_dict: dict, *, checkpoint_id=None, storage_writer=None, process_group=None):
    """Saves `state_dict` with torch's dcp.save and dtensor's SavePlanner: DTensors whose local shard
    is not one box (uneven `_StridedShard`, shard orders torch lays out otherwise) are written as the
    boxes each rank holds; everything else as DCP writes it. Every rank of the process group calls
    it. Returns DCP's Metadata. ValueError (on every rank) for a DTensor whose mesh leaves the
    process group or entries the ranks disagree on; TypeError for arguments of the wrong type."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from .checkpoint import _unwrap

    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, not {type(state_dict).__name__}")
    if storage_writer is None and checkpoint_id is None:
        raise ValueError("save needs checkpoint_id or storage_writer")
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("dtensor.torch.checkpoint.save runs on every rank of a process group: call "
                         "dist.init_process_group first")
    planner = SavePlanner(process_group=process_group)
    try:
        return dcp.save(state_dict, checkpoint_id=checkpoint_id, storage_writer=storage_writer, planner=planner,
                        process_group=process_group)
    except (Exception, CheckpointException) as err:  # (CheckpointException is a BaseException)
        cause = _unwrap(err)
        if isinstance(cause, (ValueError, TypeError)) and cause is not err:
            raise cause from err
        raise
