"""Train -> serve weight sync (docs/weight-sync.md): a whole model's parameters, held as DTensors
on the trainer's mesh, written into an inference engine's own per-rank tensors (fused projections
included), every byte crossing at most once, planned once and replayed every step.

    import dtensor.torch.weight_sync as ws
    spec = {4: [ws.Buffer("qkv", (48, 32), torch.bfloat16,
                          [ws.Part("wq", ((0, 32), (0, 32))), ws.Part("wk", ((0, 8), (0, 32)), offset=32),
                           ws.Part("wv", ((0, 8), (0, 32)), offset=40)])], ...}
    plan = ws.plan_sync(trainer_state_dict, spec)     # every rank of the default group, once
    ws.sync(plan, trainer_state_dict, engine_buffers)  # every step; engine_buffers: {name: tensor} on this rank

The engine side is plain tensors: an engine rank names each of its tensors (a `Buffer`: shape,
dtype, and the `Part`s it is made of -- a box of a trainer parameter placed at `offset` along the
buffer's dim `dim`; a box may go to several engine ranks, as GQA's replicated KV heads). The plan
sends each piece from a trainer rank that holds it (balanced: among replicas, the least loaded so
far, largest pieces first), skips pieces the receiving rank already holds (colocated engines),
coalesces every piece between two ranks in a round into one message, and splits the moves into
rounds under a staging budget. A buffer of dtype torch.float8_e4m3fn receives its values quantized
on the sender with one per-tensor scale (the amax over every element the engine tensor of that name
holds, over all ranks, / 448, in fp32; values divided by the scale, clamped to +-448, cast by
torch): half the bytes of bf16 on the wire, and bit for bit what quantizing the whole engine
tensor in one process gives. With `Buffer(..., block=B)` the scales are per B x B block of the
engine's global tensor of that name, each part placed in it by `Part(..., at=offsets)`.
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
from typing import Optional, Sequence

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from .. import _core
from ._communicator import _error_text, run_p2p
from ._layout import _mesh_info, layout_of

__all__ = ["Part", "Buffer", "SyncPlan", "plan_sync", "plan_layouts", "sync"]

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


@dataclasses.dataclass(frozen=True)
class Part:
    """A box of trainer parameter `source` ([start, stop) per dim, global indices) placed in an
    engine buffer at `offset` along the buffer's dim `dim` (the box spans the buffer's other dims)."""
    source: str
    box: tuple
    dim: int = 0
    offset: int = 0
    at: Optional[tuple] = None  # where the box sits in the engine's global tensor (block scales only)


@dataclasses.dataclass(frozen=True)
class Buffer:
    """An engine rank's tensor: its name, shape and dtype (the sources' dtype, or
    torch.float8_e4m3fn), and the parts that tile it along one dim."""
    name: str
    shape: tuple
    dtype: torch.dtype
    parts: tuple
    block: Optional[int] = None  # fp8: None, one scale per tensor; B, one per B x B block of the global tensor


@dataclasses.dataclass
class SyncPlan:
    """The plan every rank holds, compact (a model's layers and engines repeat the same pieces):
    `entries` lists (receiver, buffer name, part index, piece list, itemsize) for every part of
    every engine buffer; `pieces[k]` lists the pieces of one (trainer layout, box) -- per dim runs
    of global indices, the torch ranks holding them, their elements --; a piece is sent by the
    receiver itself when it holds it (a local copy), by its one holder, or, with several holders,
    by `senders[entry][j]`; `round_of[entry]` is the entry's round. Each rank derives its own sends and receives from
    these at sync time."""
    sources: dict            # name -> (layout JSON, torch ranks of its mesh, shape, dtype name)
    spec: dict               # torch rank -> {buffer name: Buffer}
    entries: list
    pieces: list
    senders: dict
    round_of: list
    rounds: int
    scaled: list             # fp8 buffer names, sorted
    hash: str
    wire_bytes: int          # bytes between two ranks
    local_bytes: int         # bytes a receiving rank already held (copied, not sent)
    busiest_sender_bytes: int
    busiest_receiver_bytes: int
    sender_bound_bytes: int  # max(wire bytes / trainer ranks, the most bytes only one trainer rank holds)
    grids: dict = dataclasses.field(default_factory=dict)  # block-scaled name -> (block, global extent per dim)

    def explain(self) -> str:
        return (f"weight sync: {len(self.entries)} parts in {self.rounds} round(s); {self.wire_bytes} bytes on the "
                f"wire, {self.local_bytes} already on their receivers; busiest sender {self.busiest_sender_bytes} bytes "
                f"(bound {self.sender_bound_bytes}), busiest receiver {self.busiest_receiver_bytes} bytes")

    def sender_of(self, e: int, j: int) -> int:
        """Who sends piece j of entry e (its receiver when that holds it: a local copy)."""
        receiver, _, _, k, _ = self.entries[e]
        holders = self.pieces[k][j][1]
        if receiver in holders:
            return receiver
        if len(holders) == 1:
            return holders[0]
        return self.senders[e][j]


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def _intersect(runs: list, lo: int, hi: int) -> list:
    out = []
    for a, b in runs:
        a, b = max(a, lo), min(b, hi)
        if a < b:
            out.append((a, b))
    return out


def _count(runs) -> int:
    return sum(b - a for a, b in runs)


def _check_spec(spec: dict, sources: dict, world: int) -> dict:
    """The engine spec, validated against the sources: ValueError/TypeError naming the rank, the
    buffer and the part."""
    if not isinstance(spec, dict):
        raise TypeError(f"engine spec must be a dict of torch rank -> list of Buffer, not {type(spec).__name__}")
    out = {}
    for rank, buffers in spec.items():
        if type(rank) is not int or not 0 <= rank < world:
            raise ValueError(f"engine spec: rank {rank!r} is not a rank of the default group (0..{world - 1})")
        names = {}
        for b in buffers:
            if not isinstance(b, Buffer):
                raise TypeError(f"engine spec rank {rank}: {b!r} is not a weight_sync.Buffer")
            if b.name in names:
                raise ValueError(f"engine spec rank {rank}: buffer {b.name!r} named twice")
            shape = tuple(b.shape)
            if not shape or any(type(z) is not int or z < 0 for z in shape):
                raise ValueError(f"engine spec rank {rank} buffer {b.name!r}: shape {b.shape!r} is not a list of sizes")
            if not b.parts:
                raise ValueError(f"engine spec rank {rank} buffer {b.name!r}: no parts")
            for p in b.parts:
                if not isinstance(p, Part):
                    raise TypeError(f"engine spec rank {rank} buffer {b.name!r}: {p!r} is not a weight_sync.Part")
            dims = {p.dim for p in b.parts}
            if len(dims) != 1 or not 0 <= next(iter(dims)) < len(shape):
                raise ValueError(f"engine spec rank {rank} buffer {b.name!r}: parts must share one dim of the buffer "
                                 f"(dims {sorted(dims)} for shape {shape})")
            d = next(iter(dims))
            covered = []
            for i, p in enumerate(b.parts):
                where = f"engine spec rank {rank} buffer {b.name!r} part {i} ({p.source!r})"
                if p.source not in sources:
                    raise ValueError(f"{where}: no trainer parameter of that name")
                sshape, sdtype = sources[p.source][2], sources[p.source][3]
                box = tuple(tuple(x) for x in p.box)
                if len(box) != len(sshape) or len(shape) != len(sshape):
                    raise ValueError(f"{where}: a box of {len(box)} dims for a source of {len(sshape)} dims and a "
                                     f"buffer of {len(shape)}")
                for k, (a, z) in enumerate(zip(box, sshape)):
                    if len(a) != 2 or type(a[0]) is not int or type(a[1]) is not int or not 0 <= a[0] <= a[1] <= z:
                        raise ValueError(f"{where}: box {box!r} is not within the source's shape {list(sshape)} on dim {k}")
                for k in range(len(shape)):
                    extent = box[k][1] - box[k][0]
                    if k != d and extent != shape[k]:
                        raise ValueError(f"{where}: its box spans {extent} on dim {k}, the buffer {shape[k]}")
                if type(p.offset) is not int or p.offset < 0 or p.offset + box[d][1] - box[d][0] > shape[d]:
                    raise ValueError(f"{where}: offset {p.offset!r} + {box[d][1] - box[d][0]} is past the buffer's "
                                     f"{shape[d]} on dim {d}")
                if b.dtype != sdtype and b.dtype != FP8:
                    raise ValueError(f"{where}: buffer dtype {b.dtype} is neither the source's ({sdtype}) nor "
                                     f"torch.float8_e4m3fn")
                if b.block is not None:
                    at = p.at
                    if (b.dtype != FP8 or type(b.block) is not int or b.block < 1 or not isinstance(at, (tuple, list))
                            or len(at) != len(shape) or any(type(v) is not int or v < 0 for v in at)):
                        raise ValueError(f"{where}: block scales need an fp8 buffer, a positive int block ({b.block!r}) "
                                         f"and each part's `at`, its offset in the global tensor per dim ({at!r})")
                if b.dtype == FP8 and not sdtype.is_floating_point:
                    raise ValueError(f"{where}: a {sdtype} source cannot be quantized to float8_e4m3fn")
                covered.append((p.offset, p.offset + box[d][1] - box[d][0], i))
            covered.sort()
            at = 0
            for a, z, i in covered:
                if a != at:
                    raise ValueError(f"engine spec rank {rank} buffer {b.name!r}: its parts {'overlap' if a < at else 'leave a gap'} "
                                     f"at index {min(a, at)} of dim {d} (part {i})")
                at = z
            if at != shape[d]:
                raise ValueError(f"engine spec rank {rank} buffer {b.name!r}: its parts cover {at} of {shape[d]} on dim {d}")
            # (as tuples: hashable, compared cheaply; a spec already in tuples is kept as it is)
            parts = tuple(p if type(p.box) is tuple and all(type(x) is tuple for x in p.box) and
                          (p.at is None or type(p.at) is tuple)
                          else dataclasses.replace(p, box=tuple(tuple(x) for x in p.box),
                                                   at=None if p.at is None else tuple(p.at)) for p in b.parts)
            names[b.name] = b if shape == b.shape and parts == b.parts and type(b.parts) is tuple else \
                dataclasses.replace(b, shape=shape, parts=parts)
        out[rank] = names
    return out


def _sources_of(state: dict) -> dict:
    if not isinstance(state, dict):
        raise TypeError(f"trainer state must be a dict of name -> DTensor, not {type(state).__name__}")
    out = {}
    for name, x in state.items():
        if not isinstance(x, DTensor):
            raise TypeError(f"trainer entry {name!r} is a {type(x).__name__}, not a DTensor")
        layout = layout_of(x)
        if any(p.is_partial() for p in x.placements):
            raise ValueError(f"trainer entry {name!r} is Partial ({x.placements}): reduce it first")
        info = _mesh_info(x.device_mesh)
        out[name] = (layout, list(info.torch_ranks), tuple(int(z) for z in x.shape), x.dtype)
    return out


def _blocks(layout, torch_ranks: list) -> list:
    """The distinct blocks of a layout: (per dim, owned runs) and the torch ranks holding it."""
    by = {}
    for dense, t in enumerate(torch_ranks):
        key = tuple(tuple(tuple(r) for r in runs) for runs in layout.owned_runs(dense))
        by.setdefault(key, []).append(t)
    return list(by.items())


def plan_sync(trainer_state: dict, engine_spec: dict, *, staging_bytes: Optional[int] = None) -> SyncPlan:
    """The sync plan of `trainer_state` (name -> DTensor on the trainer's mesh) into
    `engine_spec` (torch rank -> list of Buffer). Every rank of the default process group calls
    it with the same arguments (engine-only ranks pass the trainer's DTensors as they see them: the
    same names, shapes, dtypes and placements); the ranks' plans are compared by hash (ValueError
    on every rank naming those that differ). `staging_bytes` bounds what one rank stages (sends
    plus receives) per round (None: one round)."""
    plan = plan_layouts(_sources_of(trainer_state), engine_spec, dist.get_world_size(), staging_bytes=staging_bytes)
    hashes = [None] * dist.get_world_size()
    dist.all_gather_object(hashes, plan.hash)
    odd = [r for r, x in enumerate(hashes) if x != hashes[0]]
    if odd:
        raise ValueError(f"weight_sync.plan_sync: ranks {odd} planned another sync than rank 0 (every rank passes the "
                         f"same trainer layouts and engine spec)")
    return plan


def plan_layouts(sources: dict, engine_spec: dict, world: int, *, staging_bytes: Optional[int] = None) -> SyncPlan:
    """plan_sync's plan from the trainer's layouts alone, without a process group: `sources` maps
    each name to (dtensor.Layout, the torch ranks of its mesh in dense order, shape, torch dtype);
    `world` is the number of ranks. What a benchmark or a what-if plans with. Work: per distinct
    (trainer layout, box) its pieces once; per engine part O(1) besides its pieces with several
    holders (replicas), which are balanced one by one."""
    import gc
    paused = gc.isenabled()
    gc.disable()  # (a plan is hundreds of thousands of small tuples that live as long as it does)
    try:
        return _plan_layouts(sources, engine_spec, world, staging_bytes)
    finally:
        if paused:
            gc.enable()


def _plan_layouts(sources: dict, engine_spec: dict, world: int, staging_bytes: Optional[int]) -> SyncPlan:
    import heapq
    if staging_bytes is not None and (type(staging_bytes) is not int or staging_bytes < 1):
        raise ValueError(f"staging_bytes {staging_bytes!r} must be a positive int or None")
    spec = _check_spec(engine_spec, sources, world)
    layout_index, blocks, lkey_of = {}, [], {}  # layers repeat a few layouts: their blocks once
    json_of = {name: src[0].to_json() for name, src in sources.items()}  # (each layout's JSON once)
    for name, (layout, ranks, _, _) in sources.items():
        k = (json_of[name], tuple(ranks))
        if k not in layout_index:
            layout_index[k] = len(blocks)
            blocks.append(_blocks(layout, ranks))
        lkey_of[name] = layout_index[k]
    piece_index, pieces, entries = {}, [], []
    for rank in sorted(spec):
        for name in sorted(spec[rank]):
            b = spec[rank][name]
            size = _itemsize(b.dtype)  # (the source's, or fp8's)
            for i, p in enumerate(b.parts):
                key = (lkey_of[p.source], p.box)
                k = piece_index.get(key)
                if k is None:
                    found = []
                    for runs, holders in blocks[key[0]]:
                        cut = [_intersect(r, a, z) for r, (a, z) in zip(runs, p.box)]
                        if all(cut):
                            n = 1
                            for c in cut:
                                n *= _count(c)
                            found.append((tuple(tuple(c) for c in cut), tuple(holders), n))
                    k = piece_index[key] = len(pieces)
                    pieces.append(found)
                entries.append((rank, name, i, k, size))
    # per piece list: all its elements, those each rank holds, those only one rank holds, and the
    # pieces with several holders
    total, held, single, flexible = [], [], [], []
    for found in pieces:
        t, hd, sg, fx = 0, {}, {}, []
        for j, (_, holders, n) in enumerate(found):
            t += n
            for h in holders:
                hd[h] = hd.get(h, 0) + n
            if len(holders) == 1:
                sg[holders[0]] = sg.get(holders[0], 0) + n
            else:
                fx.append(j)
        total.append(t)
        held.append(hd)
        single.append(sg)
        flexible.append(fx)
    received = {}
    wire_bytes = local_bytes = 0
    weight = [0] * len(pieces)  # per piece list: the itemsizes of its entries, summed
    own = {}  # (piece list, rank): the itemsizes of the entries that rank receives (its one-holder pieces stay local)
    classes = {}  # (bytes, holders) -> [(entry, piece)]: pieces whose sender is to be chosen
    for e, (r, _, _, k, size) in enumerate(entries):
        local = held[k].get(r, 0)
        wire_bytes += (total[k] - local) * size
        local_bytes += local * size
        received[r] = received.get(r, 0) + (total[k] - local) * size
        weight[k] += size
        if r in single[k]:
            own[(k, r)] = own.get((k, r), 0) + size
        for j in flexible[k]:
            _, holders, n = pieces[k][j]
            if r not in holders:
                classes.setdefault((n * size, holders), []).append((e, j))
    only_one = {}  # bytes only one trainer rank holds (it sends them whatever the plan), per rank
    for k, sg in enumerate(single):
        for h, n in sg.items():
            if n * (weight[k] - own.get((k, h), 0)):
                only_one[h] = only_one.get(h, 0) + n * (weight[k] - own.get((k, h), 0))
    sent = dict(only_one)
    # several holders: largest pieces first (then by holder set, then in entry order), each to the
    # least loaded holder so far (ties: the lower rank)
    senders = {}
    for (nbytes, holders), items in sorted(classes.items(), key=lambda c: (-c[0][0], c[0][1])):
        heap = [(sent.get(h, 0), h) for h in holders]
        heapq.heapify(heap)
        for e, j in items:
            load, h = heap[0]
            heapq.heapreplace(heap, (load + nbytes, h))
            senders.setdefault(e, {})[j] = h
        for load, h in heap:
            sent[h] = load
    # rounds: entries in order, a new round when a rank's staged bytes would pass the budget
    round_of, rounds = [0] * len(entries), 1
    if staging_bytes is not None:
        staged = {}
        for e, (r, _, _, k, size) in enumerate(entries):
            load = {}
            for j, (_, holders, n) in enumerate(pieces[k]):
                if r in holders:
                    continue
                x = holders[0] if len(holders) == 1 else senders[e][j]
                load[x] = load.get(x, 0) + n * size
                load[r] = load.get(r, 0) + n * size
            if staged and any(staged.get(x, 0) + v > staging_bytes for x, v in load.items()):
                rounds += 1
                staged = {}
            for x, v in load.items():
                staged[x] = staged.get(x, 0) + v
            round_of[e] = rounds - 1
    grids = {}  # block-scaled names: (block, the global tensor's extent per dim), the same on every rank
    for rank in sorted(spec):
        for name, b in sorted(spec[rank].items()):
            if b.dtype != FP8:
                continue
            if name in grids and (grids[name][0] is None) != (b.block is None) or name in grids and grids[name][0] != b.block:
                raise ValueError(f"engine spec: buffer {name!r} is fp8 with block {b.block!r} on rank {rank}, "
                                 f"{grids[name][0]!r} on another: one scaling per engine tensor")
            ext = list(grids[name][1]) if name in grids else [0] * len(b.shape)
            if b.block is not None:
                for p in b.parts:
                    for d in range(len(ext)):
                        ext[d] = max(ext[d], p.at[d] + p.box[d][1] - p.box[d][0])
            grids[name] = (b.block, tuple(ext))
    trainer = sorted({t for src in sources.values() for t in src[1]})
    bound = max(-(-wire_bytes // max(len(trainer), 1)), max(only_one.values(), default=0))
    h = hashlib.sha256()
    for name in sorted(sources):
        _, ranks, shape, dtype = sources[name]
        h.update(f"{name}|{json_of[name]}|{ranks}|{shape}|{dtype}\n".encode())
    for part in (entries, pieces, sorted((e, sorted(d.items())) for e, d in senders.items()), round_of,
                 [(r, [(n, b.shape, str(b.dtype), [(p.source, p.box, p.dim, p.offset) for p in b.parts])
                        for n, b in sorted(bs.items())]) for r, bs in sorted(spec.items())]):
        h.update(repr(part).encode())
    return SyncPlan({n: (json_of[n], src[1], src[2], str(src[3])) for n, src in sources.items()}, spec, entries,
                    pieces, senders, round_of, rounds,
                    sorted({n for bs in spec.values() for n, b in bs.items() if b.dtype == FP8}), h.hexdigest()[:32],
                    wire_bytes, local_bytes, max(sent.values(), default=0), max(received.values(), default=0), bound,
                    {n: g for n, g in grids.items() if g[0] is not None})


def _positions(runs_local: list, runs: tuple) -> list:
    """Per dim, the positions in a tensor whose dim holds `runs_local` (global runs in local order)
    of the global indices `runs` (each within one of them)."""
    out = []
    for have, want in zip(runs_local, runs):
        pos = []
        for a, z in want:
            base = 0
            for s, e in have:
                if s <= a and z <= e:
                    pos.append((base + a - s, base + z - s))
                    break
                base += e - s
            else:
                raise AssertionError(f"runs {want} not held in {have}")
        out.append(pos)
    return out


def _take(t: torch.Tensor, pos: list) -> torch.Tensor:
    for d, runs in enumerate(pos):
        if len(runs) == 1:
            t = t.narrow(d, runs[0][0], runs[0][1] - runs[0][0])
        else:
            idx = torch.cat([torch.arange(a, z) for a, z in runs]).to(t.device)
            t = t.index_select(d, idx)
    return t


def _put(t: torch.Tensor, pos: list, value: torch.Tensor) -> None:
    if all(len(r) == 1 for r in pos):
        view = t
        for d, runs in enumerate(pos):
            view = view.narrow(d, runs[0][0], runs[0][1] - runs[0][0])
        view.copy_(value)
        return
    idx = []
    for d, runs in enumerate(pos):
        shape = [1] * len(pos)
        shape[d] = -1
        idx.append(torch.cat([torch.arange(a, z) for a, z in runs]).view(shape).to(t.device))
    t[tuple(idx)] = value


def _quantize(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (x.to(torch.float32) / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def _check_args(plan: SyncPlan, state: dict, buffers: dict, me: int) -> None:
    if set(state) != set(plan.sources):
        extra, missing = sorted(set(state) - set(plan.sources)), sorted(set(plan.sources) - set(state))
        raise ValueError(f"weight_sync.sync: trainer entries differ from the plan's (new {extra}, missing {missing})")
    for name, (layout_json, ranks, shape, dtype) in plan.sources.items():
        x = state[name]
        if not isinstance(x, DTensor):
            raise TypeError(f"weight_sync.sync: trainer entry {name!r} is a {type(x).__name__}, not a DTensor")
        if (layout_of(x).to_json() != layout_json or list(_mesh_info(x.device_mesh).torch_ranks) != ranks
                or tuple(x.shape) != shape or str(x.dtype) != dtype):
            raise ValueError(f"weight_sync.sync: trainer entry {name!r} is not the one planned (layout, mesh, shape or "
                             f"dtype changed: plan again)")
    mine = plan.spec.get(me, {})
    if not isinstance(buffers, dict) or set(buffers) != set(mine):
        raise ValueError(f"weight_sync.sync: rank {me} passes engine buffers {sorted(buffers) if isinstance(buffers, dict) else buffers!r}, "
                         f"the plan has {sorted(mine)}")
    device = next((x._local_tensor.device for x in state.values()), None)
    for name, b in mine.items():
        t = buffers[name]
        if isinstance(t, torch.Tensor) and device is not None and t.device != device:
            raise ValueError(f"weight_sync.sync: rank {me} buffer {name!r} is on {t.device}, the trainer's tensors on "
                             f"{device}")
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != b.shape or t.dtype != b.dtype or not t.is_contiguous():
            raise ValueError(f"weight_sync.sync: rank {me} buffer {name!r} is not a contiguous {b.dtype} tensor of "
                             f"shape {list(b.shape)} (got {getattr(t, 'dtype', type(t).__name__)} "
                             f"{list(getattr(t, 'shape', []))}, contiguous {getattr(t, 'is_contiguous', lambda: None)()})")


def sync(plan: SyncPlan, trainer_state: dict, engine_buffers: Optional[dict] = None, *,
         timeout: Optional[datetime.timedelta] = None) -> dict:
    """Runs `plan`: every rank of the default group calls it; a trainer rank passes its
    DTensors, an engine rank its buffers (name -> tensor; None: none). Arguments that differ from
    the plan's (names, shapes, dtypes, layouts, storage) raise before anything is written. Returns
    this rank's fp8 scales (buffer name -> fp32 scalar tensor) and byte counts."""
    me = dist.get_rank()
    buffers = engine_buffers or {}
    _check_args(plan, trainer_state, buffers, me)
    locals_ = {n: x._local_tensor for n, x in trainer_state.items()}
    device = next((t.device for t in locals_.values()), torch.device("cpu"))
    my_runs = plan.__dict__.setdefault("_runs", {})  # source -> its owned runs on this rank (when on its mesh)
    if not my_runs:
        from dtensor import Layout
        for name, (layout_json, ranks, _, _) in plan.sources.items():
            if me in ranks:
                my_runs[name] = [[tuple(r) for r in rs] for rs in Layout.from_json(layout_json).owned_runs(ranks.index(me))]
    # this rank's moves, per round: (entry, piece, sender, receiver), in entry then piece order
    # (the order both ends of a message list its pieces in)
    moves = plan.__dict__.setdefault("_moves", {}).get(me)
    if moves is None:
        by_holder = {}  # piece list -> {holder: its pieces}
        moves = [[] for _ in range(plan.rounds)]
        for e, (r, _, _, k, _) in enumerate(plan.entries):
            if k not in by_holder:
                d = {}
                for j, (_, holders, _) in enumerate(plan.pieces[k]):
                    for h_ in holders:
                        d.setdefault(h_, []).append(j)
                by_holder[k] = d
            js = range(len(plan.pieces[k])) if r == me else by_holder[k].get(me, ())
            for j in js:
                x = plan.sender_of(e, j)
                if x == me or r == me:
                    moves[plan.round_of[e]].append((e, j, x, r))
        plan.__dict__["_moves"][me] = moves
    # fp8 scales: each rank's amax over the pieces it sends or copies of each scaled buffer (per
    # tensor, or per block of its global tensor), and whether they are finite, reduced over the
    # world (the max of the maxima is the tensor's, or the block's, amax)
    scales, where_of = {}, {}  # name -> (first slot, block count)
    if plan.scaled:
        at = 0
        for n in plan.scaled:
            count = 1
            if n in plan.grids:
                block, ext = plan.grids[n]
                for z in ext:
                    count *= -(-z // block)
            where_of[n] = (at, count)
            at += count
        amax = torch.zeros(at, dtype=torch.float32, device=device)
        bad = torch.zeros(len(plan.scaled), dtype=torch.float32, device=device)
        slot = {n: i for i, n in enumerate(plan.scaled)}
        for rnd in moves:
            for e, j, x, r in rnd:
                _, name, i, k, _ = plan.entries[e]
                if x != me or name not in slot:
                    continue
                part = plan.spec[r][name].parts[i]
                runs = plan.pieces[k][j][0]
                piece = _take(locals_[part.source], _positions(my_runs[part.source], runs)).to(torch.float32)
                if not piece.numel():
                    continue
                if not torch.isfinite(piece).all():
                    bad[slot[name]] = 1
                elif name in plan.grids:
                    ids = _block_ids(plan.grids[name], part, runs, where_of[name][0], device)
                    amax.scatter_reduce_(0, ids.reshape(-1), piece.abs().reshape(-1), reduce="amax")
                else:
                    o = where_of[name][0]
                    amax[o] = torch.maximum(amax[o], piece.abs().max())
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        if bad.any():
            names = sorted({b.parts[i].source for bs in plan.spec.values() for n, b in bs.items()
                            if n in slot and bad[slot[n]] for i in range(len(b.parts))})
            raise ValueError(f"weight_sync.sync: NaN or Inf in a parameter to quantize to float8_e4m3fn: one of {names}")
        every = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
        for n, (o, count) in where_of.items():
            scales[n] = every[o] if n not in plan.grids else every[o:o + count].view(
                [-(-z // plan.grids[n][0]) for z in plan.grids[n][1]])
        flat_scales = every
    sent = received = 0
    for rnd_index, rnd in enumerate(moves):
        outgoing, incoming = {}, {}
        for e, j, x, r in rnd:
            _, name, i, k, size = plan.entries[e]
            b = plan.spec[r][name]
            part = b.parts[i]
            runs = plan.pieces[k][j][0]
            if x == me:
                piece = _take(locals_[part.source], _positions(my_runs[part.source], runs))
                if b.dtype == FP8:
                    s_ = (flat_scales[_block_ids(plan.grids[name], part, runs, where_of[name][0], device)]
                          if name in plan.grids else scales[name])
                    piece = _quantize(piece, s_)
                if r == me:
                    _put(buffers[name], _dest_positions(part, runs), piece)
                else:
                    outgoing.setdefault(r, []).append(piece.contiguous().view(-1).view(torch.uint8))
            else:
                incoming.setdefault(x, []).append((name, part, runs, plan.pieces[k][j][2] * size))
        ops, inbox = [], {}
        for peer in sorted(outgoing):
            data = torch.cat(outgoing[peer])
            sent += data.numel()
            ops.append(dist.P2POp(dist.isend, data, peer))
        for peer in sorted(incoming):
            n = sum(q[3] for q in incoming[peer])
            inbox[peer] = torch.empty(n, dtype=torch.uint8, device=device)
            received += n
            ops.append(dist.P2POp(dist.irecv, inbox[peer], peer))
        if ops:
            peers = sorted(set(outgoing) | set(incoming))
            try:
                run_p2p(ops, timeout)
            except RuntimeError as err:  # a peer dead, stuck or late: name them (the round's received pieces are not written)
                raise _core.BackendError(f"weight_sync.sync: rank {me}: round {rnd_index} with peer ranks {peers} "
                                         f"failed: {_error_text(err)}") from err
        for peer, qs in incoming.items():
            at = 0
            for name, part, runs, nbytes in qs:
                dtype = plan.spec[me][name].dtype
                shape = [sum(z - a for a, z in r_) for r_ in runs]
                value = inbox[peer][at:at + nbytes].view(dtype).view(shape)
                at += nbytes
                _put(buffers[name], _dest_positions(part, runs), value)
    return {"scales": {n: s for n, s in scales.items() if n in plan.spec.get(me, {})}, "sent_bytes": sent,
            "received_bytes": received}


def _block_ids(grid: tuple, part: Part, runs: tuple, first: int, device) -> torch.Tensor:
    """Per element of a piece (global source `runs` of `part`), the index of its block of the
    engine's global tensor among the name's scales (from `first`)."""
    block, ext = grid
    ids, stride = None, 1
    for d in reversed(range(len(runs))):
        g = torch.cat([torch.arange(a, z) for a, z in runs[d]]) - part.box[d][0] + part.at[d]
        shape = [1] * len(runs)
        shape[d] = -1
        term = (g // block * stride).view(shape)
        ids = term if ids is None else ids + term
        stride *= -(-ext[d] // block)
    return (ids + first).to(device)


def _dest_positions(part: Part, runs: tuple) -> list:
    """Per dim, the buffer positions of the global source indices `runs` of `part`."""
    out = []
    for d, (r, (a, _)) in enumerate(zip(runs, part.box)):
        shift = part.offset - a if d == part.dim else -a
        out.append([(s + shift, e + shift) for s, e in r])
    return out
