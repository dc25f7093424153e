"""Train -> serve weight sync (docs/weight-sync.md): a small Llama-like model trained with FSDP 2 x
TP 2 on ranks 0-3 is written into two inference engines of TP 2 (fused qkv with one KV head
shared by both TP ranks -- GQA --, fused gate_up, row-parallel o and down, replicated norms), in
bf16 and in fp8 with per-tensor scales, for three placements of the engines: on other ranks
(4-7), on the trainer's ranks (colocated), and overlapping (ranks 2-5). Against two baselines in
the same run: (a) every full tensor gathered on trainer rank 0, which sends each engine rank its
parts; (b) every parameter all-gathered over the trainer, then each engine rank's parts sent by
trainer rank (engine rank mod 4), or sliced locally when that is the engine rank itself. The
baselines' bytes include their all-gather (each trainer rank receives every parameter's elements
it does not hold).

    torchrun --nproc-per-node 8 examples/python/weight_sync.py          # CPU, gloo

Every engine rank checks its tensors bit for bit against the expected ones (for fp8: the whole
engine tensor quantized in one process); rank 0 prints the table of bytes and times.
"""
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import dtensor.torch.weight_sync as ws

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 8, "run with --nproc-per-node 8"
trainer = DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp"))

H, HEADS, KV, D, F, LAYERS = 64, 4, 1, 16, 128, 4  # hidden, query heads, KV heads, head dim, FFN, layers
shapes, placements = {}, {}
for layer in range(LAYERS):
    p = f"layers.{layer}."
    for name, shape, pl in (("wq", (HEADS * D, H), (Shard(0), Shard(0))), ("wk", (KV * D, H), (Shard(0), Shard(0))),
                            ("wv", (KV * D, H), (Shard(0), Shard(0))), ("wo", (H, HEADS * D), (Shard(0), Shard(1))),
                            ("w_gate", (F, H), (Shard(0), Shard(0))), ("w_up", (F, H), (Shard(0), Shard(0))),
                            ("w_down", (H, F), (Shard(0), Shard(1))), ("norm", (H,), (Shard(0), Replicate()))):
        shapes[p + name], placements[p + name] = shape, pl
gen = torch.Generator().manual_seed(7)
full = {n: torch.randn(s, generator=gen).to(torch.bfloat16) for n, s in shapes.items()}
# every rank builds the trainer's DTensors (ranks off the trainer mesh hold empty local tensors)
state = {n: distribute_tensor(full[n], trainer, placements[n], src_data_rank=None) for n in shapes}


def engine_spec(ranks, fp8):
    """Two engines of TP 2 on `ranks` (engine e's TP rank j is ranks[2 e + j])."""
    mat = torch.float8_e4m3fn if fp8 else torch.bfloat16
    spec = {}
    for e in range(2):
        for j in range(2):
            bufs = []
            for layer in range(LAYERS):
                p = f"layers.{layer}."
                q = HEADS * D // 2  # query rows per TP rank; the one KV head goes to both
                bufs.append(ws.Buffer(p + "qkv", (q + 2 * KV * D, H), mat, (
                    ws.Part(p + "wq", ((j * q, (j + 1) * q), (0, H))),
                    ws.Part(p + "wk", ((0, KV * D), (0, H)), offset=q),
                    ws.Part(p + "wv", ((0, KV * D), (0, H)), offset=q + KV * D))))
                f = F // 2
                bufs.append(ws.Buffer(p + "gate_up", (2 * f, H), mat, (
                    ws.Part(p + "w_gate", ((j * f, (j + 1) * f), (0, H))),
                    ws.Part(p + "w_up", ((j * f, (j + 1) * f), (0, H)), offset=f))))
                c = HEADS * D // 2
                bufs.append(ws.Buffer(p + "o", (H, c), mat, (ws.Part(p + "wo", ((0, H), (j * c, (j + 1) * c)), dim=1),)))
                bufs.append(ws.Buffer(p + "down", (H, f), mat, (ws.Part(p + "w_down", ((0, H), (j * f, (j + 1) * f)), dim=1),)))
                bufs.append(ws.Buffer(p + "norm", (H,), torch.bfloat16, (ws.Part(p + "norm", ((0, H),)),)))
            spec[ranks[2 * e + j]] = bufs
    return spec


def expected(spec, fp8):
    """Per rank, per buffer, the values it must hold: for fp8, the whole engine tensor of that name
    (every rank's parts) quantized in one process."""
    amax = {}
    for bufs in spec.values():
        for b in bufs:
            for p in b.parts:
                box = full[p.source][tuple(slice(a, z) for a, z in p.box)]
                amax[b.name] = max(amax.get(b.name, torch.tensor(0.0)), box.float().abs().max())
    out = {}
    for r, bufs in spec.items():
        out[r] = {}
        for b in bufs:
            t = torch.empty(b.shape, dtype=b.dtype)
            for p in b.parts:
                box = full[p.source][tuple(slice(a, z) for a, z in p.box)]
                if b.dtype == torch.float8_e4m3fn:
                    scale = amax[b.name] / 448.0 if amax[b.name] > 0 else torch.tensor(1.0)
                    box = (box.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
                t.narrow(p.dim, p.offset, box.shape[p.dim]).copy_(box)
            out[r][b.name] = t
    return out


def gather_bytes():
    """What the baselines' all-gather brings this rank: every parameter's elements it lacks."""
    if rank not in range(4):
        return 0
    return sum((full[n].numel() - x._local_tensor.numel()) * 2 for n, x in state.items())


def baseline_a(spec):
    """Every full tensor gathered on trainer rank 0 (an all-gather over the trainer), which sends
    each engine rank its parts (bf16): the whole model through one rank."""
    t0 = time.perf_counter()
    fulls = {n: x.full_tensor() for n, x in state.items()} if rank in range(4) else {}
    ops, recv, sent, got = [], {}, 0, gather_bytes()
    for r, bufs in spec.items():
        for b in bufs:
            for i, p in enumerate(b.parts):
                n = 1
                for a, z in p.box:
                    n *= z - a
                if rank == 0 and r != 0:
                    data = fulls[p.source][tuple(slice(a, z) for a, z in p.box)].contiguous()
                    ops.append(dist.P2POp(dist.isend, data, r))
                    sent += data.numel() * 2
                elif rank == r and r != 0:  # (rank 0 slices its own)
                    recv[(b.name, i)] = torch.empty([z - a for a, z in p.box], dtype=torch.bfloat16)
                    ops.append(dist.P2POp(dist.irecv, recv[(b.name, i)], 0))
                    got += n * 2
    for w in dist.batch_isend_irecv(ops) if ops else []:
        w.wait()
    return sent, got, time.perf_counter() - t0


def baseline_b(spec):
    """Every parameter all-gathered over the trainer, then each engine rank's parts sent by
    trainer rank (engine rank mod 4), or sliced locally on a trainer rank (bf16)."""
    t0 = time.perf_counter()
    fulls = {n: x.full_tensor() for n, x in state.items()} if rank in range(4) else {}
    ops, sent, got = [], 0, gather_bytes()
    for r, bufs in spec.items():
        src = r % 4
        if src == r:
            continue  # (sliced locally)
        for b in bufs:
            for p in b.parts:
                if rank == src:
                    data = fulls[p.source][tuple(slice(a, z) for a, z in p.box)].contiguous()
                    ops.append(dist.P2POp(dist.isend, data, r))
                    sent += data.numel() * 2
                elif rank == r:
                    data = torch.empty([z - a for a, z in p.box], dtype=torch.bfloat16)
                    ops.append(dist.P2POp(dist.irecv, data, src))
                    got += data.numel() * 2
    for w in dist.batch_isend_irecv(ops) if ops else []:
        w.wait()
    return sent, got, time.perf_counter() - t0


def all_max(v):
    t = torch.tensor([float(v)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def all_sum(v):
    t = torch.tensor([float(v)], dtype=torch.float64)
    dist.all_reduce(t)
    return int(t.item())


rows = []
for placement, ranks in (("disjoint", [4, 5, 6, 7]), ("colocated", [0, 1, 2, 3]), ("overlapping", [2, 3, 4, 5])):
    for fp8 in (False, True):
        spec = engine_spec(ranks, fp8)
        t0 = time.perf_counter()
        plan = ws.plan_sync(state, spec)
        plan_s = time.perf_counter() - t0
        buffers = {b.name: torch.full(b.shape, 0, dtype=b.dtype) for b in spec.get(rank, [])}
        dist.barrier()
        t0 = time.perf_counter()
        out = ws.sync(plan, state, buffers)
        t_sync = time.perf_counter() - t0
        want = expected(spec, fp8).get(rank, {})
        for n, t in buffers.items():
            assert torch.equal(t.view(torch.uint8), want[n].view(torch.uint8)), f"rank {rank}: {n} differs ({placement})"
        # replayed: the same plan, the next step's weights (here: the same), no planning
        t0 = time.perf_counter()
        ws.sync(plan, state, buffers)
        t_replay = time.perf_counter() - t0
        assert plan.busiest_sender_bytes <= 1.05 * plan.sender_bound_bytes, plan.explain()
        a = baseline_a(spec) if not fp8 else (0, 0, 0.0)
        b = baseline_b(spec) if not fp8 else (0, 0, 0.0)
        rows.append((placement, "fp8" if fp8 else "bf16", plan.wire_bytes, plan.local_bytes, plan.busiest_sender_bytes,
                     plan.sender_bound_bytes, plan.busiest_receiver_bytes, all_max(t_sync), all_max(t_replay),
                     all_max(plan_s), all_sum(a[1]), all_max(a[1]), all_max(a[2]), all_sum(b[1]), all_max(b[1]),
                     all_max(b[2])))
        sys.stdout.write(f"rank {rank}: {placement} {'fp8' if fp8 else 'bf16'}: {len(buffers)} engine tensors equal\n")
        sys.stdout.flush()

if rank == 0:
    print("weight sync: 4 trainer ranks (FSDP 2 x TP 2) -> 2 engines x TP 2, "
          f"{LAYERS} layers (fused qkv with GQA, gate_up), gloo on CPU; bytes received over the wire in all and by the "
          "busiest receiver; seconds of the slowest rank")
    print(f"{'placement':<12} {'dtype':<5} | {'wire B':>8} {'local B':>8} {'busiest send':>12} {'bound':>8} "
          f"{'busiest recv':>12} {'sync s':>7} {'replay s':>8} {'plan s':>7} | {'(a) wire B':>10} {'(a) busiest':>11} "
          f"{'(a) s':>6} | {'(b) wire B':>10} {'(b) busiest':>11} {'(b) s':>6}")
    for r in rows:
        base = (f"{r[10]:>10} {int(r[11]):>11} {r[12]:>6.3f} | {r[13]:>10} {int(r[14]):>11} {r[15]:>6.3f}" if r[1] == "bf16"
                else f"{'':>10} {'':>11} {'':>6} | {'':>10} {'':>11} {'':>6}")
        print(f"{r[0]:<12} {r[1]:<5} | {r[2]:>8} {r[3]:>8} {r[4]:>12} {r[5]:>8} {r[6]:>12} {r[7]:>7.3f} {r[8]:>8.3f} "
              f"{r[9]:>7.3f} | {base}")
    print("weight_sync: ok")
dist.destroy_process_group()
