"""Loading a DCP checkpoint into DTensors of any layout dtensor models (docs/checkpoint.md).

    import dtensor.torch.checkpoint as dck
    dck.load(state_dict, checkpoint_id="ckpt/")      # a checkpoint written by torch's dcp.save

    # or, calling dcp.load yourself:
    dcp.load(state_dict, storage_reader=dck.StorageReader("ckpt/"), planner=dck.LoadPlanner())

Every saved chunk is read by exactly one rank (dtensor.plan_load: the reads balanced, a rank that
needs the bytes preferred), through DCP's own StorageReader (FileSystemReader by default), and
every rank then receives the elements its local shard holds from the chunk's reader, in one
batch of point-to-point transfers -- or, where the cost model prices it lower (`fanout`),
replicated targets receive a sharded intermediate that one batch of collectives inside the mesh
then gathers. Every mesh rank plans its own part (dtensor.plan_load_part: the same decision on
every rank, then only its reads and messages) in `create_local_plan`; DCP's coordinator checks in
`create_global_plan` that every rank made the same decision (its hash). Exact for
every layout dtensor models, `_StridedShard` targets included (DCP's default load is not:
docs/torch-defects.md). Entries that are not DTensors (plain tensors, non-tensor state) take
DCP's default path in the same `dcp.load`.

`save` (and `SavePlanner` for users' own `dcp.save`) writes DTensors whose local shard is not the
one box DCP records -- uneven `_StridedShard`, shard orders torch lays out otherwise -- as the
boxes each rank really holds; every other entry as DCP writes it.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import StorageReader as _TorchStorageReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor

from .. import _core
from ._communicator import _error_text
from ._layout import _dtype_name, _mesh_info, _spec_of, layout_of
from ._load_moves import Target, check_part, local_part, read_files, run_part
from ._ragged import redistribute_local

__all__ = ["load", "plan", "request_json", "save", "LoadPlanner", "SavePlanner", "StorageReader", "LoadResult"]

_KEY = "dtensor"  # this module's entry in DCP's planner_data


def __getattr__(name: str):
    # save and SavePlanner live in their own module (which imports this one's _unwrap)
    if name in ("save", "SavePlanner"):
        from . import _checkpoint_save
        return getattr(_checkpoint_save, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass
class LoadResult:
    """What a load did, on this rank: the plan's decision hash and totals (the same on every rank),
    this rank's bytes, and this rank's part of the plan (a dtensor.LoadPart: every mesh rank plans
    its own part; None on a rank outside the mesh)."""
    hash: int
    total_read_bytes: int
    busiest_read_bytes: int
    balanced_read_bytes: int
    moved_bytes: int
    gathered: int  # tensors received sharded and gathered inside the mesh (the fan-out)
    gathered_bytes: int  # what that batch brings the ranks, summed over ranks
    read_bytes: int
    sent_bytes: int
    received_bytes: int
    chunks_read: int
    plan: Optional[_core.LoadPart] = None


def _check_ragged_arg(ragged) -> dict:
    """The `ragged` argument's shape: {key: (local tensor, DeviceMesh, RaggedLayout or placements text)}."""
    if ragged is None:
        return {}
    if not isinstance(ragged, dict):
        raise TypeError(f"ragged must be a dict of key -> (local tensor, DeviceMesh, layout), not {type(ragged).__name__}")
    for fqn, v in ragged.items():
        if not isinstance(v, tuple) or len(v) != 3:
            raise TypeError(f"ragged[{fqn!r}] must be (local tensor, DeviceMesh, layout), not {type(v).__name__}")
        local, device_mesh, layout = v
        if not isinstance(local, torch.Tensor) or isinstance(local, DTensor):
            raise TypeError(f"ragged[{fqn!r}]: the local must be a plain torch.Tensor, not {type(local).__name__}")
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError(f"ragged[{fqn!r}]: the mesh must be a DeviceMesh, not {type(device_mesh).__name__}")
        if not isinstance(layout, (str, _core.RaggedLayout)):
            raise TypeError(f"ragged[{fqn!r}]: the layout must be a dtensor.RaggedLayout or placements text, not "
                            f"{type(layout).__name__}")
    return ragged


def _saved_of(fqn: str, md) -> _core.SavedTensor:
    """The SavedTensor of a key's TensorStorageMetadata (its dtype already checked against the target's)."""
    return _core.SavedTensor(fqn, list(md.size), _dtype_name(md.properties.dtype),
                             [(list(c.offsets), list(c.sizes)) for c in md.chunks])


def _ragged_target(fqn: str, md, value: tuple, cost_model) -> Target:
    """A RaggedShard target (see load's `ragged`), checked against its metadata: loaded into its
    plain intermediate (dtensor.ragged_intermediate), then moved to the ragged pieces."""
    local, device_mesh, layout = value
    info = _mesh_info(device_mesh)
    if isinstance(layout, str):
        layout = _core.RaggedLayout(info.mesh, list(md.size), layout, _dtype_name(md.properties.dtype))
    if layout.mesh != info.mesh:
        raise ValueError(f"{fqn}: the ragged layout's mesh {layout.mesh} is not the device mesh's {info.mesh}")
    if list(layout.shape) != list(md.size) or layout.dtype != _dtype_name(md.properties.dtype):
        raise ValueError(f"{fqn}: saved as {_dtype_name(md.properties.dtype)} {list(md.size)}, the ragged target is "
                         f"{layout.dtype} {list(layout.shape)}")
    if local.dtype != md.properties.dtype:
        raise ValueError(f"{fqn}: the local has dtype {local.dtype}, the checkpoint {md.properties.dtype}")
    _, coord = info.my_coord()
    if local.numel() != layout.local_numel(coord) or not local.is_contiguous():
        raise ValueError(f"{fqn}: the local must be a contiguous tensor of this rank's {layout.local_numel(coord)} "
                         f"elements (shape {layout.local_shape(coord)} or flat), not {list(local.shape)}")
    via = _core.ragged_intermediate(layout, cost_model)
    buf = torch.empty(via.local_shape(coord), dtype=local.dtype, device=local.device)
    x = DTensor(buf, _spec_of(device_mesh, via), requires_grad=False)
    return Target(fqn, x, _saved_of(fqn, md), via, ragged=layout, sink=local)


def _targets(state_dict: dict, metadata, allow_partial: bool = False, ragged: Optional[dict] = None,
             cost_model: Any = "default"):
    """[Target] for the DTensor entries and the RaggedShard ones (`ragged`) in key order (whatever
    order each rank's dict has), checked against the metadata, and their DeviceMesh."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    ragged = ragged or {}
    out = []
    mesh = None
    entries = [(fqn, x) for fqn, x in state_dict.items() if isinstance(x, DTensor)]
    for fqn in ragged:
        if fqn in state_dict:
            raise ValueError(f"{fqn}: both in the state dict and in ragged (a key is loaded one way)")
        entries.append((fqn, ragged[fqn]))
    for fqn, x in sorted(entries, key=lambda kv: str(kv[0])):
        md = metadata.state_dict_metadata.get(fqn)
        if md is None:
            if allow_partial:
                continue
            raise ValueError(f"{fqn}: not in the checkpoint")
        device_mesh = x.device_mesh if isinstance(x, DTensor) else x[1]
        if mesh is None:
            mesh = device_mesh
        elif device_mesh is not mesh and _mesh_info(device_mesh).mesh != _mesh_info(mesh).mesh:
            raise ValueError(f"{fqn}: on device mesh {device_mesh}, the other targets on {mesh}: one mesh per load")
        if not isinstance(md, TensorStorageMetadata):
            raise ValueError(f"{fqn}: the checkpoint holds {type(md).__name__}, not a tensor")
        if not isinstance(x, DTensor):
            out.append(_ragged_target(fqn, md, x, cost_model))
            continue
        if md.properties.dtype != x.dtype:
            raise ValueError(f"{fqn}: saved as {md.properties.dtype}, the target is {x.dtype}")
        if list(md.size) != list(x.shape):
            raise ValueError(f"{fqn}: saved with shape {list(md.size)}, the target has {list(x.shape)}")
        out.append(Target(fqn, x, _saved_of(fqn, md), layout_of(x)))
    return out, mesh


def _fingerprint(targets: list, mesh) -> str:
    """What every rank must agree on for one plan to serve them all: the keys, layouts and mesh, and
    the saved chunks each rank read from the metadata."""
    h = hashlib.sha256()
    if mesh is not None:
        h.update(repr(_mesh_info(mesh).grid.tolist()).encode())
    for t in targets:
        h.update(t.fqn.encode() + b"\0" + t.layout.to_json().encode() + b"\0" + repr(t.saved.chunks).encode()
                 + b"\0" + (str(t.ragged).encode() if t.ragged is not None else b""))
    return h.hexdigest()[:32]


def plan(state_dict: dict, metadata, *, cost_model: Any = "default", read_bw_GBps: Optional[float] = None,
         read_alpha_us: Optional[float] = None, fanout: str = "cheapest",
         ragged: Optional[dict] = None) -> Optional[_core.LoadPlan]:
    """The load plan of `state_dict`'s DTensors (and `ragged`'s targets, as `load` takes them) from
    a checkpoint's metadata (None without DTensors)."""
    targets, _ = _targets(state_dict, metadata, False, _check_ragged_arg(ragged), cost_model)
    if not targets:
        return None
    return _plan_of(targets, cost_model, read_bw_GBps, read_alpha_us, fanout)


def request_json(state_dict: dict, checkpoint_id=None, *, storage_reader=None) -> str:
    """The load request of `state_dict`'s DTensors from a checkpoint, as JSON: what
    `dtensor load-plan --request FILE` and `dtensor.LoadRequest.from_json` read (the saved chunks
    from the checkpoint's metadata, the targets' layouts). Reads the metadata only."""
    import json
    if storage_reader is None:
        if checkpoint_id is None:
            raise ValueError("request_json needs checkpoint_id or storage_reader")
        storage_reader = FileSystemReader(checkpoint_id)
    targets, _ = _targets(state_dict, storage_reader.read_metadata())
    if not targets:
        raise ValueError("request_json: the state dict has no DTensor entries")
    return json.dumps({"tensors": [{"name": t.fqn, "layout": json.loads(t.layout.to_json()), "chunks": t.saved.chunks}
                                   for t in targets]})


def _part_of(targets, rank: int, cost_model, read_bw_GBps, read_alpha_us, fanout) -> _core.LoadPart:
    return _core.plan_load_part([t.saved for t in targets], [t.layout for t in targets], rank, cost_model, read_bw_GBps,
                                read_alpha_us, fanout)


def _plan_of(targets, cost_model, read_bw_GBps, read_alpha_us, fanout) -> _core.LoadPlan:
    # (None: the cost profile's storage field, as plan_load takes it)
    return _core.plan_load([t.saved for t in targets], [t.layout for t in targets], cost_model, read_bw_GBps,
                           read_alpha_us, fanout)


class LoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, except for DTensor entries: those leave DCP's per-rank plans,
    every mesh rank plans its own part (dtensor.plan_load_part) in `create_local_plan`, the
    coordinator checks in `create_global_plan` that all made the same decision, and dtensor's
    StorageReader runs each rank's part in `read_data`. Pair it
    with `StorageReader` (a plain reader is refused). `cost_model`, `read_bw_GBps` and
    `read_alpha_us` price the plan (unset: the cost profile's storage fields, else the defaults);
    `fanout` says how replicas get their copies ("cheapest" by the cost model, "direct" point to
    point from the readers, "gather" a sharded intermediate gathered inside the mesh);
    `timeout` bounds the wait for a peer during the moves (None: the process group's)."""

    def __init__(self, *, cost_model: Any = "default", read_bw_GBps: Optional[float] = None,
                 read_alpha_us: Optional[float] = None, timeout: Optional[datetime.timedelta] = None,
                 fanout: str = "cheapest", ragged: Optional[dict] = None, flatten_state_dict: bool = True,
                 flatten_sharded_tensors: bool = True, allow_partial_load: bool = False) -> None:
        super().__init__(flatten_state_dict=flatten_state_dict, flatten_sharded_tensors=flatten_sharded_tensors,
                         allow_partial_load=allow_partial_load)
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            raise TypeError(f"timeout must be a datetime.timedelta, not {type(timeout).__name__}")
        for name, v in (("read_bw_GBps", read_bw_GBps), ("read_alpha_us", read_alpha_us)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise TypeError(f"{name} must be a number, not {type(v).__name__}")
        if fanout not in ("cheapest", "direct", "gather"):
            raise ValueError(f"fanout {fanout!r} is not 'cheapest', 'direct' or 'gather'")
        self.cost_model, self.read_bw_GBps, self.read_alpha_us, self.timeout = (cost_model, read_bw_GBps,
                                                                                read_alpha_us, timeout)
        self.fanout = fanout
        self.ragged = _check_ragged_arg(ragged)
        self.targets: list = []
        self.part: Optional[_core.LoadPart] = None
        self.result: Optional[LoadResult] = None
        self.failure: Optional[BaseException] = None
        self._part = None

    def set_up_planner(self, state_dict, metadata=None, is_coordinator: bool = False) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("dtensor.torch.checkpoint loads on every rank of a process group; DCP's no-collectives "
                             "path (no process group, or no_dist=True) is not supported: call dist.init_process_group")
        super().set_up_planner(state_dict, metadata, is_coordinator)
        self.targets, self._mesh = _targets(self.state_dict, metadata, self.allow_partial_load, self.ragged,
                                            self.cost_model)
        self.part, self.result, self.failure, self._part = None, None, None, None

    def create_local_plan(self):
        local = super().create_local_plan()
        mine = {t.fqn for t in self.targets}
        local.items = [i for i in local.items if i.dest_index.fqn not in mine]
        # every mesh rank plans its own part (dtensor.plan_load_part: the same decision on every
        # rank, then only its reads and messages); the coordinator compares the decision hashes
        decision = None
        if self.targets:
            info = _mesh_info(self._mesh)
            if dist.get_rank() in info.dense:
                self.part = _part_of(self.targets, info.dense[dist.get_rank()], self.cost_model, self.read_bw_GBps,
                                     self.read_alpha_us, self.fanout)
                self._part = local_part(self.part)
                decision = self._part["hash"]
        local.planner_data = {_KEY: {"rank": dist.get_rank(), "fingerprint": _fingerprint(self.targets, self._mesh),
                                     "reader": False, "decision": decision}}
        return local

    def create_global_plan(self, global_plan: list) -> list:
        global_plan = super().create_global_plan(global_plan)
        entries = [p.planner_data.get(_KEY) if isinstance(p.planner_data, dict) else None for p in global_plan]
        if any(e is None for e in entries):
            raise ValueError("dtensor.torch.checkpoint.LoadPlanner: some rank's local plan was not made by a "
                             "dtensor LoadPlanner (every rank passes one)")
        if len(global_plan) != dist.get_world_size() and len(global_plan) == 1:
            raise ValueError("dtensor.torch.checkpoint.LoadPlanner: DCP planned this load without collectives (one "
                             "local plan in a world of several: rank-local metadata or no_dist); not supported")
        missing = [e["rank"] for e in entries if not e["reader"]]
        if missing:
            raise ValueError(f"dtensor.torch.checkpoint.LoadPlanner needs dtensor.torch.checkpoint.StorageReader as "
                             f"the storage reader (ranks {missing} use another, which would skip the DTensor entries)")
        odd = [e["rank"] for e in entries if e["fingerprint"] != entries[0]["fingerprint"]]
        if odd:
            raise ValueError(f"dtensor.torch.checkpoint.LoadPlanner: ranks {odd} load other keys or layouts, or read "
                             f"other metadata, than rank {entries[0]['rank']} (every rank passes the same DTensor "
                             f"entries)")
        if not self.targets:
            return global_plan
        info = _mesh_info(self._mesh)
        present = {e["rank"] for e in entries}
        lost = [r for r in info.torch_ranks if r not in present]
        if lost:
            raise ValueError(f"dtensor.torch.checkpoint.LoadPlanner: mesh ranks {lost} are not in DCP's process group")
        decisions = {e["rank"]: e.get("decision") for e in entries if e["rank"] in info.dense}
        agreed = decisions.get(entries[0]["rank"]) if entries[0]["rank"] in info.dense else next(iter(decisions.values()))
        odd = sorted(r for r, d in decisions.items() if d != agreed)
        if odd:
            raise ValueError(f"dtensor.torch.checkpoint.LoadPlanner: ranks {odd} planned another load (decision hash) "
                             f"than the others from the same keys and metadata (every rank passes the same cost "
                             f"model, storage figures and fan-out)")
        out = []
        for p, e in zip(global_plan, entries):
            data = dict(p.planner_data)
            data[_KEY] = {"decision": agreed} if e["rank"] in info.dense else None
            out.append(dataclasses.replace(p, planner_data=data))
        return out

    def finish_plan(self, new_plan):
        data = new_plan.planner_data if isinstance(new_plan.planner_data, dict) else {}
        agreed = data.get(_KEY)
        if self._part is not None and (not isinstance(agreed, dict) or agreed.get("decision") != self._part["hash"]):
            raise ValueError("dtensor.torch.checkpoint.LoadPlanner: the coordinator's agreed plan is not the one this "
                             "rank planned")
        return super().finish_plan(new_plan)

    def run(self, storage_reader, own_items=None) -> Optional[LoadResult]:
        """This rank's part: DCP's own items of this rank (`own_items`, a torch LoadPlan) and its
        planned chunks read through `storage_reader`, every mesh rank's reads agreed on, then the
        moves. StorageReader's read_data calls it. A read that fails on any mesh rank raises
        dtensor.BackendError on every mesh rank, naming that rank, the file and the cause."""
        early: Optional[BaseException] = None
        try:
            if own_items is not None and own_items.items:
                read_files(storage_reader, own_items.items, self)
        except Exception as e:
            early = e
        if not self.targets or self._part is None:
            if early is not None:
                raise early
            return None
        info = _mesh_info(self._mesh)
        me = info.dense[dist.get_rank()]
        try:
            reads, messages, post = [], [], None
            if early is None:
                try:
                    reads, messages, post = check_part(self._part, self.targets, me, len(info.torch_ranks))
                except ValueError as e:
                    early = e
            counts = run_part(reads, messages, post, self.targets, me, info.torch_ranks, storage_reader, self.timeout,
                              failure=early)
            for t in self.targets:  # RaggedShard targets: from the intermediate to the pieces
                if t.ragged is not None:
                    piece = redistribute_local(t.x._local_tensor, t.x.device_mesh, t.layout, t.ragged,
                                               cost_model=self.cost_model)
                    t.sink.view(-1).copy_(piece.reshape(-1))
        except BaseException as e:
            self.failure = e
            raise
        totals = self._part["totals"]
        self.result = LoadResult(hash=self._part["hash"], plan=self.part, **totals, **counts)
        return self.result


class StorageReader(_TorchStorageReader):
    """A DCP StorageReader that runs a dtensor LoadPlanner's part after the reader's own items:
    wraps `inner` (a StorageReader, or a path for FileSystemReader). Every other call goes to
    `inner`. DCP's rank-local-metadata (no-collectives) path is refused."""

    def __init__(self, inner: Any = None) -> None:
        if inner is None or isinstance(inner, (str, bytes)) or hasattr(inner, "__fspath__"):
            inner = FileSystemReader(inner) if inner is not None else None
        elif not isinstance(inner, _TorchStorageReader):
            raise TypeError(f"inner must be a torch.distributed.checkpoint.StorageReader or a path, not "
                            f"{type(inner).__name__}")
        self.inner = inner

    def _reader(self):
        if self.inner is None:
            raise ValueError("dtensor.torch.checkpoint.StorageReader has no checkpoint: give a path or a reader, or "
                             "pass checkpoint_id to dcp.load")
        return self.inner

    @property
    def checkpoint_id(self):
        return getattr(self.inner, "checkpoint_id", None)

    def reset(self, checkpoint_id=None) -> None:
        if self.inner is None:
            if checkpoint_id is None:
                raise ValueError("dtensor.torch.checkpoint.StorageReader needs a checkpoint_id")
            self.inner = FileSystemReader(checkpoint_id)
        else:
            self.inner.reset(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return FileSystemReader.validate_checkpoint_id(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any):
        if "rank" in kwargs:
            raise ValueError("dtensor.torch.checkpoint.StorageReader: the checkpoint has no global metadata (DCP's "
                             "rank-local, no-collectives path is not supported)")
        return self._reader().read_metadata(*args, **kwargs)

    def set_up_storage_reader(self, metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("use_collectives", True) is False:
            raise ValueError("dtensor.torch.checkpoint.StorageReader: DCP's no-collectives path is not supported")
        import inspect
        if kwargs and "kwargs" in inspect.signature(self._reader().set_up_storage_reader).parameters:
            self._reader().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        else:
            self._reader().set_up_storage_reader(metadata, is_coordinator)

    def prepare_local_plan(self, plan):
        plan = self._reader().prepare_local_plan(plan)
        if isinstance(plan.planner_data, dict) and isinstance(plan.planner_data.get(_KEY), dict):
            plan.planner_data[_KEY]["reader"] = True
        return plan

    def prepare_global_plan(self, plans):
        return self._reader().prepare_global_plan(plans)

    def read_data(self, plan, planner):
        from torch.futures import Future
        if isinstance(planner, LoadPlanner):
            planner.run(self._reader(), own_items=plan)
        elif plan.items:
            self._reader().read_data(plan, planner).wait()
        done: Future = Future()
        done.set_result(None)
        return done


def _unwrap(err: BaseException) -> BaseException:
    """The error behind a CheckpointException: among its per-rank failures (lowest rank first) the
    first ValueError, TypeError or dtensor.BackendError, else the first RuntimeError (a backend's),
    else `err`."""
    failures = getattr(err, "failures", None)
    if not isinstance(failures, dict):
        return err
    found = [f[0] if isinstance(f, tuple) else f for _, f in sorted(failures.items())]
    for kinds in ((ValueError, TypeError, _core.BackendError), (RuntimeError,)):
        for e in found:
            if isinstance(e, kinds):
                return e
    return err


def load(state_dict: dict, *, checkpoint_id=None, storage_reader=None, process_group=None,
         cost_model: Any = "default", read_bw_GBps: Optional[float] = None, read_alpha_us: Optional[float] = None,
         timeout: Optional[datetime.timedelta] = None, allow_partial_load: bool = False,
         fanout: str = "cheapest", ragged: Optional[dict] = None) -> Optional[LoadResult]:
    """Loads a checkpoint written by `dcp.save` into `state_dict` in place, as `dcp.load` does (one
    call of it): DTensor entries through dtensor's load plan, anything else through DCP's default
    path. Every rank of the process group calls it with the same keys. Returns this rank's
    LoadResult (None without DTensors). ValueError for a key the checkpoint lacks or holds with
    another dtype or shape, metadata whose chunks do not tile a tensor (naming the tensor and
    chunk), DTensors on several meshes; dtensor.BackendError when a peer fails during the moves.

    `ragged` loads RaggedShard targets, which no DTensor holds: {key: (local, device_mesh, layout)}
    with `local` this rank's piece (a contiguous tensor, flat or (rows, trailing extents...)),
    `layout` a dtensor.RaggedLayout or its placements text ("RaggedShard((0,),(1,3,0,0))"), on the
    mesh of the DTensors. Each is loaded into its plain intermediate (dtensor.ragged_intermediate)
    and moved to the pieces by dtensor's ragged plan; the keys stay out of `state_dict`."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, not {type(state_dict).__name__}")
    if storage_reader is None and checkpoint_id is None:
        raise ValueError("load needs checkpoint_id or storage_reader")
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("dtensor.torch.checkpoint.load runs on every rank of a process group (DCP's no-collectives "
                         "path is not supported: call dist.init_process_group first)")
    reader = storage_reader if isinstance(storage_reader, StorageReader) else StorageReader(storage_reader)
    planner = LoadPlanner(cost_model=cost_model, read_bw_GBps=read_bw_GBps, read_alpha_us=read_alpha_us,
                          timeout=timeout, allow_partial_load=allow_partial_load, fanout=fanout, ragged=ragged)
    try:
        dcp.load(state_dict, checkpoint_id=checkpoint_id, storage_reader=reader, planner=planner,
                 process_group=process_group)
    except (Exception, CheckpointException) as err:  # (CheckpointException is a BaseException)
        # this rank's own failure first, else what the CheckpointException carries
        cause = planner.failure if planner.failure is not None else _unwrap(err)
        if isinstance(cause, (ValueError, TypeError, _core.BackendError)):
            if cause is err:
                raise
            raise cause from err
        if isinstance(cause, RuntimeError):  # a backend's own error, in DCP's collectives or a peer's
            raise _core.BackendError(f"dtensor.torch.checkpoint.load failed on rank {dist.get_rank()} (in DCP's "
                                     f"collectives or a peer's part): {_error_text(cause)}") from err
        raise
    return planner.result
