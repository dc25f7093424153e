"""One rank's part of a checkpoint load plan (docs/checkpoint.md): the chunks it reads, through
DCP's StorageReader, then the pieces it sends and receives, as bytes in one batch of
point-to-point transfers, then (for tensors received in an intermediate layout) the plan's batch
of collectives inside the mesh. The part arrives from the coordinator and is checked here against
this rank's own targets before it sizes a buffer or moves a byte."""

from __future__ import annotations

import datetime
from typing import Any, Optional

import torch
import torch.distributed as dist

from .. import _core
from ._communicator import _error_text, run_p2p


class Target:
    """One entry of a load: its key, the DTensor, the SavedTensor and its dtensor Layout (for a
    RaggedShard target: a DTensor of its plain intermediate, see `ragged`)."""

    __slots__ = ("fqn", "x", "saved", "layout", "received", "ragged", "sink", "_runs")

    def __init__(self, fqn: str, x, saved, layout, ragged=None, sink=None):
        self.fqn, self.x, self.saved, self.layout = fqn, x, saved, layout
        self.received = layout  # the layout the moves land in: the target, or its intermediate
        # a RaggedShard target: `layout` is its plain intermediate (x a DTensor over a fresh buffer),
        # `ragged` the RaggedLayout and `sink` the caller's local tensor the piece is written to
        self.ragged, self.sink = ragged, sink
        self._runs: dict = {}

    def receive_as(self, layout) -> None:
        """The moves land in `layout` (the target's, or an intermediate's) from now on."""
        if layout is not self.received:
            self.received, self._runs = layout, {}

    def cut(self, c: int, rank: int) -> list:
        """Per dim, (local positions, global indices) of the elements of chunk `c` that mesh rank
        `rank` owns in the received layout: (start, stop) pairs where they are one run, else index
        tensors."""
        runs = self._runs.get(rank)
        if runs is None:
            runs = self._runs[rank] = self.received.owned_runs(rank)
        offsets, sizes = self.saved.chunks[c]
        return [_positions(r, o, o + s) for r, o, s in zip(runs, offsets, sizes)]


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


class _Capture:
    """The LoadPlanner side a StorageReader's read_data calls: each read chunk into a fresh CPU tensor."""

    def __init__(self, dtypes: dict):
        self.dtypes = dtypes
        self.chunks: dict = {}
        self.committed: dict = {}  # key -> the tensor the reader committed

    def resolve_tensor(self, req):
        key = (req.storage_index.fqn, tuple(req.storage_index.offset))
        t = torch.empty(tuple(req.lengths), dtype=self.dtypes[req.storage_index.fqn])
        self.chunks[key] = t
        return t

    def commit_tensor(self, req, tensor) -> None:
        self.committed[(req.storage_index.fqn, tuple(req.storage_index.offset))] = tensor

    def load_bytes(self, req, value) -> None:  # (no byte items are asked for)
        raise AssertionError("dtensor.torch.checkpoint reads tensors only")


def make_part(plan, rank: int, post: Optional[str], decision_hash: int) -> dict:
    """Mesh rank `rank`'s part of a LoadPlan: the chunks it reads, the messages it sends or
    receives, the fan-out (the staged tensors and the post batch's JSON, the same for every rank),
    the plan's totals (what every rank reports) and its decision hash."""
    return {"hash": decision_hash, "rank": rank, "reads": [], "messages": [], "staged": list(plan.staged), "post": post,
            "totals": {"total_read_bytes": plan.total_read_bytes, "busiest_read_bytes": plan.busiest_read_bytes,
                       "balanced_read_bytes": plan.balanced_read_bytes, "moved_bytes": plan.moved_bytes,
                       "gathered_bytes": plan.gathered_bytes,
                       "gathered": len(plan.staged)}}


def local_part(part) -> dict:
    """A dtensor.LoadPart (this rank's part, planned here) as run_part takes it."""
    plan = part.plan
    out = make_part(plan, part.rank, plan.post.to_json() if len(plan.staged) else None, part.decision_hash)
    out["reads"] = [(t, c) for t, c, _, _ in plan.reads]
    out["messages"] = list(plan.messages)
    return out


def split_plan(plan, ranks: int) -> list:
    """Every mesh rank's part of `plan`, in one pass over its reads and messages."""
    post = plan.post.to_json() if len(plan.staged) else None
    parts = [make_part(plan, r, post, plan.decision_hash) for r in range(ranks)]
    for t, c, reader, _ in plan.reads:
        parts[reader]["reads"].append((t, c))
    for m in plan.messages:
        parts[m[2]]["messages"].append(m)
        if m[3] != m[2]:
            parts[m[3]]["messages"].append(m)
    return parts


def _int(v, what: str) -> int:
    if type(v) is not int:
        raise ValueError(f"load plan part: {what} is {v!r}, not an int")
    return v


def check_part(part: Any, targets: list, me: int, ranks: int) -> tuple:
    """Validates a part received from the coordinator against this rank's own targets (untrusted:
    every index in range, every message's element count the one this rank computes, every chunk
    this rank sends read by it, each tensor's local shard received exactly once in total; the post
    batch as BatchPlan.from_json reads it, one plan per staged tensor ending in its target, from an
    intermediate on its mesh, shape and dtype without Partial). Points each staged Target at its
    intermediate. Returns (reads, messages, post) with `post` None or (BatchPlan, its plans, the
    staged tensor indices).
    ValueError naming the offending entry."""
    keys = {"hash", "rank", "reads", "messages", "staged", "post", "totals"}
    if not isinstance(part, dict) or not keys <= set(part):
        raise ValueError(f"load plan part: not a dtensor load plan part ({type(part).__name__})")
    if _int(part["rank"], "rank") != me:
        raise ValueError(f"load plan part: addressed to mesh rank {part['rank']}, this is mesh rank {me}")
    post = _check_post(part, targets)
    reads, seen = [], set()
    for e in part["reads"]:
        if not isinstance(e, (tuple, list)) or len(e) != 2:
            raise ValueError(f"load plan part: read {e!r} is not (tensor, chunk)")
        t, c = _int(e[0], "a read's tensor"), _int(e[1], "a read's chunk")
        if not 0 <= t < len(targets) or not 0 <= c < len(targets[t].saved.chunks) or (t, c) in seen:
            raise ValueError(f"load plan part: read of tensor {t} chunk {c} is out of range or repeated")
        seen.add((t, c))
        reads.append((t, c))
    messages, got = [], [0] * len(targets)
    received = set()
    for e in part["messages"]:
        if not isinstance(e, (tuple, list)) or len(e) != 5:
            raise ValueError(f"load plan part: message {e!r} is not (tensor, chunk, from, to, elements)")
        t, c, frm, to, n = (_int(v, "a message field") for v in e)
        if not 0 <= t < len(targets) or not 0 <= c < len(targets[t].saved.chunks):
            raise ValueError(f"load plan part: message {tuple(e)} names a tensor or chunk out of range")
        if not (0 <= frm < ranks and 0 <= to < ranks) or me not in (frm, to):
            raise ValueError(f"load plan part: message {tuple(e)} has ranks out of range or not this rank ({me})")
        if frm == me and (t, c) not in seen:
            raise ValueError(f"load plan part: message {tuple(e)} sends chunk {c} of {targets[t].fqn}, which this "
                             f"rank does not read")
        parts = targets[t].cut(c, to)
        want = 1
        for p, _ in parts:
            want *= _count(p)
        if n != want or n <= 0:
            raise ValueError(f"load plan part: message {tuple(e)} carries {n} elements; rank {to} owns {want} of "
                             f"chunk {c} of {targets[t].fqn}")
        if to == me:
            if (t, c) in received:
                raise ValueError(f"load plan part: chunk {c} of {targets[t].fqn} is received twice")
            received.add((t, c))
            got[t] += n
        messages.append((t, c, frm, to, n, parts))
    for t, target in enumerate(targets):
        if got[t] != target.received.local_numel(me):
            raise ValueError(f"load plan part: {target.fqn}: the plan brings {got[t]} elements to mesh rank {me}, "
                             f"which holds {target.received.local_numel(me)}")
    return reads, messages, post


def _check_post(part: dict, targets: list) -> Optional[tuple]:
    """The part's fan-out, validated: staged tensor indices ascending and in range, and the post
    batch's plans each from an intermediate of its target's mesh, shape and dtype (no Partial) to
    the target itself. Points every Target at the layout its moves land in."""
    staged, text = part["staged"], part["post"]
    if not isinstance(staged, list) or (text is None) != (len(staged) == 0):
        raise ValueError("load plan part: 'staged' must be a list, empty exactly when 'post' is None")
    for t in targets:
        t.receive_as(t.layout)
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"load plan part: 'post' is a {type(text).__name__}, not a batch plan's JSON")
    batch = _core.BatchPlan.from_json(text)
    plans = batch.plans
    if len(plans) != len(staged):
        raise ValueError(f"load plan part: the post batch holds {len(plans)} plans for {len(staged)} staged tensors")
    last = -1
    for t, p in zip(staged, plans):
        if _int(t, "a staged tensor") <= last or t >= len(targets):
            raise ValueError(f"load plan part: staged tensor {t} is out of range, order or repeated")
        last = t
        target = targets[t]
        if p.dst != target.layout:
            raise ValueError(f"load plan part: {target.fqn}: the post plan ends in {p.dst}, the target is {target.layout}")
        via = p.src
        if (via.mesh != target.layout.mesh or list(via.shape) != list(target.layout.shape)
                or via.dtype != target.layout.dtype or any(q.kind == "partial" for q in via.placements)):
            raise ValueError(f"load plan part: {target.fqn}: intermediate {via} is not a layout of the target's mesh, "
                             f"shape and dtype without Partial")
        target.receive_as(via)
    return batch, plans, staged


class MoveFailed(_core.BackendError):
    """A peer failed or never came during the moves (a dtensor.BackendError)."""


class ReadFailed(_core.BackendError):
    """A rank could not read its planned chunks (a dtensor.BackendError naming the file and cause)."""


def read_files(storage_reader, items: list, planner) -> list:
    """Reads `items` (torch ReadItems) into `planner` through `storage_reader`, one read_data call
    per storage file (the reader's storage_data says which; one call when it has none). Returns
    [(file, items)] in the order read. Raises ReadFailed naming the file (or the chunk that has no
    storage entry) and the cause."""
    from torch.distributed.checkpoint.planner import LoadPlan

    storage = getattr(storage_reader, "storage_data", None)
    per_file: dict = {}
    for item in items:
        where = "the checkpoint"
        if isinstance(storage, dict):
            info = storage.get(item.storage_index)
            if info is None:
                ix = item.storage_index
                raise ReadFailed(f"the checkpoint's metadata has no storage entry for chunk {ix.index} (offsets "
                                 f"{list(ix.offset) if ix.offset is not None else []}) of {ix.fqn!r}")
            where = str(getattr(info, "relative_path", where))
        per_file.setdefault(where, []).append(item)
    for where, group in per_file.items():
        try:
            storage_reader.read_data(LoadPlan(group), planner).wait()
        except Exception as err:
            raise ReadFailed(f"reading {where!r}: {_error_text(err)}") from err
    return list(per_file.items())


def read_part(reads: list, targets: list, storage_reader) -> tuple:
    """Reads this rank's planned chunks through `storage_reader`, one call per storage file, and
    checks that each arrived whole (committed with its planned shape). Returns (chunks by (fqn,
    offsets), bytes read). Raises ReadFailed naming the file, the tensor and chunk, and the cause."""
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import LoadItemType, ReadItem

    items, read_bytes = [], 0
    for t, c in reads:
        offsets, sizes = targets[t].saved.chunks[c]
        index = MetadataIndex(targets[t].fqn, torch.Size(offsets), c)
        zeros = torch.Size([0] * len(offsets))
        items.append(ReadItem(type=LoadItemType.TENSOR, dest_index=index, dest_offsets=zeros, storage_index=index,
                              storage_offsets=zeros, lengths=torch.Size(sizes)))
        n = 1
        for s_ in sizes:
            n *= s_
        read_bytes += n * targets[t].x.element_size()
    capture = _Capture({tg.fqn: tg.x.dtype for tg in targets})
    for where, items in read_files(storage_reader, items, capture):
        for item in items:
            key = (item.storage_index.fqn, tuple(item.storage_index.offset))
            got = capture.committed.get(key)
            if got is None or tuple(got.shape) != tuple(item.lengths):
                shape = "nothing" if got is None else f"shape {list(got.shape)}"
                raise ReadFailed(f"reading {where!r}: the chunk at offsets {list(item.storage_index.offset)} of "
                                 f"{item.storage_index.fqn!r} came back as {shape}, not shape {list(item.lengths)}")
    return capture.chunks, read_bytes


def agree(failure: Optional[BaseException], device_mesh, me: int, torch_ranks: list,
          timeout: Optional[datetime.timedelta]) -> Optional[tuple]:
    """Every mesh rank says whether its reads succeeded, before any move starts: an all-reduce of
    the first failing mesh rank along each mesh dim in turn (a reduction over the whole mesh), then,
    on a failure, that rank's error text summed in the same way (every other rank adds zeros).
    Returns None when every rank read its chunks, else (the failing torch rank, its error text).
    A peer that does not come within `timeout` raises MoveFailed naming the group's ranks."""
    n = len(torch_ranks)
    groups = [device_mesh.get_group(m) for m in range(device_mesh.ndim)]
    device = torch.device("cpu")
    if any("nccl" in str(dist.get_backend(g)) and "gloo" not in str(dist.get_backend(g)) for g in groups):
        device = torch.device("cuda", torch.cuda.current_device())

    def reduce(t: torch.Tensor, op) -> torch.Tensor:
        for m, g in enumerate(groups):
            try:
                w = dist.all_reduce(t, op=op, group=g, async_op=True)
                if timeout is None:
                    w.wait()
                elif not w.wait(timeout):
                    raise RuntimeError(f"not done after {timeout.total_seconds():g} s")
            except RuntimeError as err:
                peers = sorted(dist.get_process_group_ranks(g))
                raise MoveFailed(f"dtensor.torch.checkpoint.load: agreeing that every rank read its chunks failed on "
                                 f"rank {dist.get_rank()} (peer ranks {peers}, mesh dim {m}): {_error_text(err)}") from err
        return t

    first = reduce(torch.tensor([me if failure is not None else n], dtype=torch.int64, device=device),
                   dist.ReduceOp.MIN)
    f = int(first.item())
    if f >= n:
        return None
    text = torch.zeros(1024, dtype=torch.int32, device=device)
    if f == me:
        raw = (str(failure) or type(failure).__name__).encode("utf-8", "replace")[:1000]
        text[0] = len(raw)
        text[1:1 + len(raw)] = torch.tensor(list(raw), dtype=torch.int32, device=device)
    text = reduce(text, dist.ReduceOp.SUM).cpu()
    size = max(0, min(int(text[0]), 1000))
    return torch_ranks[f], bytes(int(b) & 0xFF for b in text[1:1 + size].tolist()).decode("utf-8", "replace")


def run_part(reads: list, messages: list, post: Optional[tuple], targets: list, me: int, torch_ranks: list,
             storage_reader, timeout: Optional[datetime.timedelta], failure: Optional[BaseException] = None) -> dict:
    """Reads this rank's chunks through `storage_reader` (read_part), agrees with every mesh rank
    that all reads succeeded (`failure`: this rank's earlier failure, e.g. in DCP's own entries),
    then sends and receives its messages in one batch (`messages` as check_part returns them) and
    writes every piece into its DTensor's local shard, or into its intermediate's for a staged
    tensor, which the post batch then takes to the target inside the mesh. Returns this rank's
    byte counts. A rank whose reads fail makes every rank raise ReadFailed naming it, its file and
    the cause, before any move; a peer that fails or does not come within `timeout` raises
    MoveFailed naming it (the post batch's collectives: a dtensor.BackendError within the mesh
    groups' timeout)."""
    chunks, read_bytes = {}, 0
    if failure is None:
        try:
            chunks, read_bytes = read_part(reads, targets, storage_reader)
        except Exception as err:
            failure = err
    mesh = targets[0].x.device_mesh
    failed = agree(failure, mesh, me, torch_ranks, timeout)
    if failed is not None:
        rank, text = failed
        err = ReadFailed(f"dtensor.torch.checkpoint.load: rank {rank} could not read its planned chunks (no move "
                         f"started): {text}")
        if failure is not None:
            raise err from failure
        raise err
    device = targets[0].x._local_tensor.device if targets else torch.device("cpu")
    outs = [torch.empty(tg.received.local_shape(me), dtype=tg.x.dtype, device=device) if tg.received is not tg.layout
            else tg.x._local_tensor if tg.x._local_tensor.is_contiguous() else tg.x._local_tensor.contiguous()
            for tg in targets]
    ops, pending, peers, sent, received = [], [], set(), 0, 0
    for t, c, frm, to, n, parts in messages:
        tg = targets[t]
        offsets, _ = tg.saved.chunks[c]
        shape = [_count(p[0]) for p in parts]
        if frm == me:
            piece = _select(chunks[(tg.fqn, tuple(offsets))], [g for _, g in parts], offsets).to(device)
            if to == me:
                _place(outs[t], [p for p, _ in parts], piece.reshape(shape))
                continue
            buf = piece.contiguous().view(torch.uint8)
            ops.append(dist.P2POp(dist.isend, buf, torch_ranks[to]))
            peers.add(torch_ranks[to])
            sent += buf.numel()
        else:
            buf = torch.empty(n * tg.x.element_size(), dtype=torch.uint8, device=device)
            ops.append(dist.P2POp(dist.irecv, buf, torch_ranks[frm]))
            peers.add(torch_ranks[frm])
            pending.append((t, parts, shape, buf))
            received += buf.numel()
    if ops:
        try:
            run_p2p(ops, timeout)
        except RuntimeError as err:
            raise MoveFailed(f"dtensor.torch.checkpoint.load: the moves failed on rank {dist.get_rank()} (peer ranks "
                             f"{sorted(peers)}): {_error_text(err)}") from err
    for t, parts, shape, buf in pending:
        _place(outs[t], [p for p, _ in parts], buf.view(targets[t].x.dtype).reshape(shape))
    if post is not None:  # the fan-out inside the mesh: every staged tensor to its target, as one batch
        from ._api import run_batch
        batch, plans, staged = post
        done = run_batch(batch, plans, targets[staged[0]].x.device_mesh, [outs[t] for t in staged])
        for t, out in zip(staged, done):
            outs[t] = out
    for tg, out in zip(targets, outs):
        if out is not tg.x._local_tensor:
            tg.x._local_tensor.copy_(out)
    return {"read_bytes": read_bytes, "sent_bytes": sent, "received_bytes": received, "chunks_read": len(reads)}
