"""Loading a DCP checkpoint: dtensor.torch.checkpoint.load against DCP's default dcp.load (gloo, CPU
processes, a checkpoint on local disk). docs/checkpoint.md has the table this prints.

    torchrun --nproc-per-node 8 bench/checkpoint_load.py save DIR8 --layout fsdp_tp   # dp=4,tp=2
    torchrun --nproc-per-node 4 bench/checkpoint_load.py save DIR4 --layout fsdp      # Shard(0) on 4
    torchrun --nproc-per-node 4 bench/checkpoint_load.py load DIR8 --layout fsdp --repeats 3
    torchrun --nproc-per-node 4 bench/checkpoint_load.py load DIR8 --layout tp_replicas --repeats 3
    torchrun --nproc-per-node 8 bench/checkpoint_load.py load DIR4 --layout fsdp_tp --repeats 3
    torchrun --nproc-per-node 4 bench/checkpoint_load.py load DIR8 --layout tp_replicas --repeats 3 \
        --methods dtensor-direct,dtensor-gather,dcp     # the fan-out: point to point vs gathered in the mesh
    (--device cuda: NCCL with one GPU per rank, for save and load; not yet run: no multi-GPU machine)

A synthetic transformer (--layers 16, --dim 1024: 235M f32 parameters, 0.94 GB). Each load runs
both methods in turn (the page cache of the checkpoint's files dropped before each: drop_caches
where the machine allows it, else posix_fadvise(DONTNEED) per file, which is said), and prints per
method the bytes read in all and by the busiest rank, the bytes moved between ranks (dtensor: its
messages plus what its gather inside the mesh brings), the median
wall time (slowest rank) and whether every local shard equals the saved values bit for bit.
Methods: dtensor (fanout="cheapest", the cost model's choice), dtensor-direct, dtensor-gather, dcp.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def params(layers: int, dim: int):
    out = [("embed", (32000, dim), False)]
    for l in range(layers):
        out += [(f"l{l}.qkv", (3 * dim, dim), False), (f"l{l}.o", (dim, dim), True),
                (f"l{l}.up", (4 * dim, dim), False), (f"l{l}.down", (dim, 4 * dim), True), (f"l{l}.norm", (dim,), False)]
    return out


def placements(layout: str, shape, row_parallel: bool):
    tp = Shard(1) if row_parallel and len(shape) > 1 else Shard(0)
    if layout == "fsdp":
        return (4,), [Shard(0)]
    if layout == "fsdp_tp":
        return (4, 2), [Shard(0), tp if len(shape) > 1 else Replicate()]
    if layout == "tp_replicas":
        return (2, 2), [Replicate(), tp if len(shape) > 1 else Replicate()]
    raise ValueError(layout)


def values(i: int, shape, index):
    """The saved values at the global indices `index` (per dim): exact in f32."""
    lin = index[0].view(-1, *([1] * (len(shape) - 1)))
    for d in range(1, len(shape)):
        lin = lin * shape[d] + index[d].view(*([1] * d), -1, *([1] * (len(shape) - d - 1)))
    return ((lin * 7 + i) % 65521).to(torch.float32) * 0.5


class CountingReader(FileSystemReader):
    """DCP's FileSystemReader, counting the bytes of the stored items this rank reads."""

    def __init__(self, path):
        super().__init__(path)
        self.read_bytes = 0

    def read_data(self, plan, planner):
        self.read_bytes += sum(self.storage_data[r.storage_index].length for r in plan.items)
        return super().read_data(plan, planner)


def drop_cache(path: str) -> str:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        for root, _, files in os.walk(path):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        return "posix_fadvise(DONTNEED) per file"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["save", "load"])
    ap.add_argument("path")
    ap.add_argument("--layout", required=True, choices=["fsdp", "fsdp_tp", "tp_replicas"])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu: gloo; cuda: NCCL, one GPU per rank (the fan-out's owed GPU measurement)")
    ap.add_argument("--methods", default="dtensor,dcp",
                    help="comma-separated: dtensor, dtensor-direct, dtensor-gather (dtensor's fan-outs), dcp")
    a = ap.parse_args()
    methods = a.methods.split(",")
    for m in methods:
        if m not in ("dtensor", "dtensor-direct", "dtensor-gather", "dcp"):
            ap.error(f"--methods: {m!r} is not dtensor, dtensor-direct, dtensor-gather or dcp")
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ps = params(a.layers, a.dim)
    shape0, _ = placements(a.layout, (1, 1), False)
    mesh = init_device_mesh(a.device, shape0)
    if a.mode == "save":
        sd = {}
        for i, (name, shape, row) in enumerate(ps):
            _, pl = placements(a.layout, shape, row)
            x = distribute_tensor(torch.empty(shape, device=a.device), mesh, pl, src_data_rank=None)
            import dtensor.torch as dt
            runs = dt.layout_of(x).owned_runs(rank)
            index = [torch.tensor([g for s, e in r for g in range(s, e)], dtype=torch.long) for r in runs]
            x._local_tensor.copy_(values(i, shape, index).to(a.device))
            sd[name] = x
        dcp.save(sd, checkpoint_id=a.path)
        if rank == 0:
            n = sum(torch.Size(s).numel() for _, s, _ in ps)
            print(f"saved {len(ps)} tensors, {n / 1e6:.0f}M f32 parameters, as {a.layout} on {world} ranks")
        dist.destroy_process_group()
        return
    import dtensor.torch as dt
    import dtensor.torch.checkpoint as dck
    results = {}
    how = ""
    for rep in range(a.repeats):
        for method in methods:
            sd, want = {}, {}
            for i, (name, shape, row) in enumerate(ps):
                _, pl = placements(a.layout, shape, row)
                x = distribute_tensor(torch.empty(shape, device=a.device), mesh, pl, src_data_rank=None)
                x._local_tensor.fill_(float("nan"))
                sd[name] = x
            if rank == 0:
                how = drop_cache(a.path)
            dist.barrier()
            reader = CountingReader(a.path)
            t0 = time.perf_counter()
            if method.startswith("dtensor"):
                fanout = {"dtensor": "cheapest", "dtensor-direct": "direct", "dtensor-gather": "gather"}[method]
                plan = dck.load(sd, storage_reader=reader, fanout=fanout)
                moved = plan.moved_bytes + plan.gathered_bytes
            else:
                dcp.load(sd, storage_reader=reader)
                moved = 0
            if a.device == "cuda":
                torch.cuda.synchronize()
            dist.barrier()
            elapsed = time.perf_counter() - t0
            ok = True
            for i, (name, shape, row) in enumerate(ps):
                runs = dt.layout_of(sd[name]).owned_runs(rank)
                index = [torch.tensor([g for s, e in r for g in range(s, e)], dtype=torch.long) for r in runs]
                ok = ok and torch.equal(sd[name]._local_tensor.cpu(), values(i, shape, index))
            stats = torch.tensor([reader.read_bytes, reader.read_bytes, elapsed * 1e6, 0 if ok else 1], dtype=torch.float64, device=a.device)
            total, busiest, slowest, wrong = stats.clone(), stats.clone(), stats.clone(), stats.clone()
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
            dist.all_reduce(busiest, op=dist.ReduceOp.MAX)
            r = results.setdefault(method, {"times": []})
            r["times"].append(busiest[2].item() / 1e6)
            r.update(total=int(total[0]), busiest=int(busiest[1]), moved=moved, exact=int(total[3]) == 0)
    if rank == 0:
        print(f"{a.layout} on {world} ranks from {a.path} (page cache: {how}), {a.repeats} repeats")
        print(f"  {'method':<14} {'read total B':>14} {'busiest rank B':>15} {'moved B':>14} {'median s':>9} {'times s':<24} exact")
        for m, r in results.items():
            print(f"  {m:<14} {r['total']:>14} {r['busiest']:>15} {r['moved']:>14} {statistics.median(r['times']):>9.2f} "
                  f"{' '.join(f'{t:.2f}' for t in r['times']):<24} {r['exact']}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
