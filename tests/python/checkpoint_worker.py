"""dcp.save under one layout, dtensor.torch.checkpoint.load under another (gloo, CPU processes).

    checkpoint_worker.py save DIR WORLD        every dtype, uneven shapes, FSDP2+TP on a 2x2 mesh (world 4)
    checkpoint_worker.py load DIR WORLD CASE [HOW]
        CASE: tp2 (1-d mesh of 2, a _StridedShard target among others), rtp (2x2: TP on 2 replicated
        over 2), fsdp4, ragged (mesh of 4: RaggedShard targets through load's `ragged`, uneven
        pieces, empty ones and a single owner, beside Shard(0) DTensors).  HOW: load (dtensor.torch.checkpoint.load, the default), gather (the same with
        fanout="gather": replicated targets received sharded, then gathered inside the mesh), dcp
        (dcp.load with dtensor's LoadPlanner and StorageReader), dies (mesh rank 3 exits before its part runs), late (it
        comes 12 s late; the others wait 4 s), refusals (misuse and bad metadata, each one clear error).
Each loading rank prints "rank R: N of M tensors equal" after comparing every local shard bit for bit
with the saved tensor's elements it should hold (from dtensor's ownership, not from the load), and the
chunks its storage reader read (every rank's list: each saved chunk read by exactly one rank). The
non-tensor entry and the plain tensor go through DCP's default path in the same call."""
import datetime
import itertools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2]
SHAPES = [(10, 6), (7, 5), (9,), (3, 8), (0, 4), (5, 1)]


def full(i: int, dtype, shape):
    n = 1
    for s in shape:
        n *= s
    v = torch.arange(n, dtype=torch.float64).reshape(shape) + 3 * i
    if dtype == torch.bool:
        return (v.long() % 3 == 0)
    if dtype.is_floating_point and dtype.itemsize == 1:
        return (v % 16 / 4).to(dtype)  # exact in fp8
    return (v % 100).to(dtype)


def tensors():
    out = []
    for i, dt in enumerate(DTYPES):
        out.append((f"t{i}.{str(dt).split('.')[-1]}", dt, SHAPES[i % len(SHAPES)]))
    out.append(("big.f32", torch.float32, (33, 17)))
    return out


def say(line: str) -> None:
    """One line to stdout in one write (atomic on a pipe up to 4 KiB): the ranks' lines never interleave."""
    os.write(1, (line[:4000] + "\n").encode())


def counting_reader(path: str, log: list):
    """A FileSystemReader that records every (key, chunk offset) it reads."""
    from torch.distributed.checkpoint import FileSystemReader

    class Counting(FileSystemReader):
        def read_data(self, plan, planner):
            log.extend((i.storage_index.fqn, tuple(i.storage_index.offset or ())) for i in plan.items)
            return super().read_data(plan, planner)
    return Counting(path)


def refusals(rank: int, path: str, sd: dict, dck, dcp) -> None:
    """Misuse and bad metadata: one clear error on every rank, nothing loaded wrong."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.tensor import Replicate, distribute_tensor

    def expect(fn, pattern):
        try:
            fn()
        except (Exception, CheckpointException) as e:  # dcp.load wraps a rank's error in CheckpointException
            text = str(e) + " ".join(str(f[0] if isinstance(f, tuple) else f)
                                     for f in (getattr(e, "failures", None) or {}).values())
            assert pattern in text, (pattern, text[:600])
            return
        raise AssertionError(f"no error; wanted {pattern!r}")

    # dtensor's planner with DCP's own reader would skip the DTensor entries
    expect(lambda: dcp.load(sd, checkpoint_id=path, planner=dck.LoadPlanner()),
           "needs dtensor.torch.checkpoint.StorageReader")
    # DCP's no-collectives path
    expect(lambda: dcp.load(sd, storage_reader=dck.StorageReader(path), planner=dck.LoadPlanner(), no_dist=True),
           "without collectives")
    # ranks that disagree on a layout
    name = next(n for n, x in sd.items() if hasattr(x, "device_mesh") and x.shape[0] >= 2)
    odd = dict(sd)
    if rank == 1:
        odd[name] = distribute_tensor(torch.zeros(sd[name].shape, dtype=sd[name].dtype), sd[name].device_mesh,
                                      [Replicate()], src_data_rank=None)
    expect(lambda: dck.load(odd, checkpoint_id=path), "ranks [1] load other keys or layouts")

    # metadata whose chunks overlap: the tensor and chunk named, before any byte is read
    class Overlapping(FileSystemReader):
        def read_metadata(self, *a, **k):
            md = super().read_metadata(*a, **k)
            chunks = md.state_dict_metadata[name].chunks
            chunks[1] = type(chunks[1])(offsets=chunks[0].offsets, sizes=chunks[1].sizes)
            return md
    before = sd[name]._local_tensor.clone()
    expect(lambda: dck.load(sd, storage_reader=Overlapping(path)), f"tensor {name}: chunk 0")
    assert torch.equal(before.view(torch.uint8), sd[name]._local_tensor.view(torch.uint8)), "written after an error"

    # RaggedShard targets: bad arguments, each one clear error on every rank
    mesh, x = sd[name].device_mesh, sd[name]
    rest = {n: v for n, v in sd.items() if n != name}
    rag = "RaggedShard((0,),(1,0))"
    expect(lambda: dck.load(rest, checkpoint_id=path, ragged={name: (torch.empty(3, dtype=x.dtype), mesh, rag)}),
           "the local must be a contiguous tensor of this rank's")
    expect(lambda: dck.load(sd, checkpoint_id=path, ragged={name: (torch.empty(3, dtype=x.dtype), mesh, rag)}),
           "both in the state dict and in ragged")
    expect(lambda: dck.load(rest, checkpoint_id=path, ragged={name: (x, mesh, rag)}), "must be a plain torch.Tensor")
    expect(lambda: dck.load(rest, checkpoint_id=path, ragged={name: (torch.empty(3), mesh)}),
           "must be (local tensor, DeviceMesh, layout)")
    expect(lambda: dck.load(rest, checkpoint_id=path, ragged={"nope": (torch.empty(3), mesh, rag)}),
           "nope: not in the checkpoint")


def run(rank: int, world: int, mode: str, path: str, case: str, how: str) -> None:
    try:
        run_rank(rank, world, mode, path, case, how)
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def run_rank(rank: int, world: int, mode: str, path: str, case: str, how: str) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=20))
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard
    import torch.distributed.checkpoint as dcp
    if mode == "save":
        mesh = init_device_mesh("cpu", (2, 2))
        sd = {}
        for i, (name, dt, shape) in enumerate(tensors()):
            pl = [Shard(0), Shard(len(shape) - 1)] if i % 2 == 0 else [Shard(0), Shard(0)]
            sd[name] = distribute_tensor(full(i, dt, shape), mesh, pl, src_data_rank=None)
        sd["plain"] = torch.arange(5.0)
        sd["meta"] = {"epoch": 7}
        dcp.save(sd, checkpoint_id=path)
        say(f"rank {rank}: saved")
    else:
        import dtensor
        import dtensor.torch as dt_
        import dtensor.torch.checkpoint as dck
        from dtensor.torch._layout import _dtype_name
        if case == "tp2":
            mesh = init_device_mesh("cpu", (2,))
            options = [[_StridedShard(0, split_factor=2)], [Shard(0)], [Replicate()], [Shard(-1)]]
        elif case == "rtp":
            mesh = init_device_mesh("cpu", (2, 2))
            options = [[Replicate(), Shard(-1)], [Replicate(), Shard(0)], [Shard(0), Replicate()]]
        else:
            mesh = init_device_mesh("cpu", (4,))
            options = [[Shard(0)], [_StridedShard(0, split_factor=2)], [Shard(-1)]]
        sd, want, ragged = {}, {}, {}
        for i, (name, dt, shape) in enumerate(tensors()):
            if case == "ragged" and i % 3 != 2:
                # a RaggedShard over every dim (pieces of any length): the first units whose sum divides numel
                n = 1
                for d in shape:
                    n *= d
                units = next(u for u in [(1, 3, 0, 1), (1, 2, 0, 1), (1, 2, 0, 0), (0, 0, 1, 0)] if n % sum(u) == 0)
                k = len(shape)
                if i % 3 == 0 and len(shape) >= 2 and n > 0:
                    # veScale's rule over dim 0 alone: a unit cutting a row, every piece whole rows
                    row = n // shape[0]
                    cut = [u for u in itertools.product(range(7), repeat=4) if sum(u) and n % sum(u) == 0
                           and (n // sum(u)) % row and all((n // sum(u)) * sum(u[:j]) % row == 0 for j in range(5))]
                    if cut:  # the one with the most non-empty pieces
                        units, k = min(cut, key=lambda u: (-sum(x > 0 for x in u), u)), 1
                text = f"RaggedShard(({','.join(str(d) for d in range(k))},),({','.join(map(str, units))}))"
                layout = dtensor.RaggedLayout(dtensor.Mesh("4"), list(shape), text, _dtype_name(dt))
                local = torch.empty(layout.local_shape(rank), dtype=dt)
                local.view(torch.uint8).fill_(0xA5)
                ragged[name] = (local, mesh, text if i % 2 else layout)
                ids = torch.tensor([g for a, b in layout.owned_runs(rank) for g in range(a, b)], dtype=torch.long)
                want[name] = full(i, dt, shape).reshape(-1)[ids].reshape(local.shape)
                continue
            pl = [Shard(p.dim % len(shape)) if type(p) is Shard else p for p in options[i % len(options)]]
            if any(isinstance(p, _StridedShard) for p in pl) and shape[0] < 4:
                pl = [Shard(0) for _ in pl]
            x = distribute_tensor(torch.zeros(shape, dtype=dt), mesh, pl, src_data_rank=None)
            # garbage in the target, so that every element must be written
            x._local_tensor.view(torch.uint8).fill_(0xA5)
            sd[name] = x
            layout = dt_.layout_of(x)
            runs = layout.owned_runs(dist.get_rank())
            index = [torch.tensor([g for a, b in r for g in range(a, b)], dtype=torch.long) for r in runs]
            f = full(i, dt, shape)
            want[name] = f[tuple(ix.view([-1 if d == k else 1 for d in range(len(index))]) for k, ix in enumerate(index))]
        sd["plain"] = torch.zeros(5)
        sd["meta"] = {"epoch": 0}
        log: list = []
        reader = dck.StorageReader(counting_reader(path, log))
        if how in ("dies", "late", "corrupt"):
            import dtensor
            if rank == 3 and how != "corrupt":
                def die(*args, **kwargs):
                    if how == "late":
                        time.sleep(12)
                    os._exit(1)
                dck.run_part = die
            t0 = time.time()
            try:
                # a corrupt checkpoint fails on a reader at once: every rank must hear of it long before
                # this timeout (the test allows 10 s)
                dck.load(sd, storage_reader=reader, timeout=datetime.timedelta(seconds=4 if how != "corrupt" else 60))
                say(f"rank {rank}: loaded without its peer")
            except dtensor.BackendError as e:
                say(f"rank {rank}: BackendError after {time.time() - t0:.1f} s: {e}")
            except BaseException as e:  # (a CheckpointException is a BaseException)
                say(f"rank {rank}: other error after {time.time() - t0:.1f} s: {type(e).__name__}: {e}")
            os._exit(0)
        if how == "refusals":
            refusals(rank, path, sd, dck, dcp)
            say(f"rank {rank}: refusals ok")
            dist.barrier()
            os._exit(0)
        if how == "dcp":
            planner = dck.LoadPlanner()
            dcp.load(sd, storage_reader=reader, planner=planner)
            result = planner.result
        else:
            result = dck.load(sd, storage_reader=reader, fanout="gather" if how == "gather" else "cheapest",
                              ragged=ragged or None)
        # every rank planned its own part (no coordinator plan): its part of the one plan
        part = result.plan
        assert isinstance(part, dtensor.LoadPart) and part.rank == rank and part.decision_hash == result.hash, part
        hashes = [None] * world
        dist.all_gather_object(hashes, result.hash)
        assert len(set(hashes)) == 1, hashes
        if not ragged:
            # the request file re-plans the whole load: this rank's part is its part of that plan, and
            # the plan's JSON round trip checks against the load (a request file holds DTensors only)
            req = dtensor.LoadRequest.from_json(dck.request_json(sd, path))
            fanout = "gather" if how == "gather" else "cheapest"
            plan = dtensor.plan_load(req.saved, req.targets, fanout=fanout)
            assert plan.decision_hash == result.hash and plan.part(rank) == part
            if rank == 0:
                assert dtensor.LoadPlan.from_json(plan.to_json()) == plan
                plan.check(req.saved, req.targets)
        assert len(part.plan.staged) > 0 or how != "gather", part.plan.staged
        names = [n for n in sd if n not in ("plain", "meta")]
        equal = sum(torch.equal(sd[n]._local_tensor.contiguous().view(torch.uint8), want[n].contiguous().view(torch.uint8))
                    for n in names)
        equal += sum(torch.equal(ragged[n][0].view(torch.uint8), want[n].contiguous().view(torch.uint8)) for n in ragged)
        names += list(ragged)
        assert torch.equal(sd["plain"], torch.arange(5.0)) and sd["meta"] == {"epoch": 7}, (sd["plain"], sd["meta"])
        reads = [None] * world
        dist.all_gather_object(reads, log)
        flat = [r for rs in reads for r in rs if r[0] not in ("plain", "meta.epoch")]
        md = reader.read_metadata()
        saved = sum(1 for n in names for c in md.state_dict_metadata[n].chunks if c.sizes.numel() > 0)
        say(f"rank {rank}: gathered {result.gathered}")
        say(f"rank {rank}: {equal} of {len(names)} tensors equal; read {result.total_read_bytes} bytes, busiest "
              f"{result.busiest_read_bytes}; this rank read {result.read_bytes}; chunks read {len(flat)}, distinct "
              f"{len(set(flat))}, saved {saved}")
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    mode, path, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    case = sys.argv[4] if len(sys.argv) > 4 else ""
    how = sys.argv[5] if len(sys.argv) > 5 else "load"
    ctx = mp.start_processes(run, args=(world, mode, path, case, how), nprocs=world, join=False, start_method="spawn")
    for p in ctx.processes:
        p.join(150)
    sys.exit(max(abs(p.exitcode or 0) for p in ctx.processes) if how not in ("dies", "late", "corrupt") else 0)
