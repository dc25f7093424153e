"""A real training step with dtensor switched in: a transformer block (attention + MLP, about
3.2 M parameters) under tensor parallelism (colwise / rowwise, sequence parallel around them) on
the `tp` dim and FSDP2 (`fully_shard`) on the `dp` dim of a 2x2 mesh, SGD, CPU and gloo.

    torchrun --nproc-per-node 4 examples/python/train_fsdp_tp.py [--steps 20]

The same 20 steps run twice from the same seed: with torch's own redistribution, then under
`dtensor.torch.enabled()`, where every redistribution torch's DTensor makes (explicit,
implicit in sharding propagation, and in the backward pass) runs dtensor's plan. FSDP2's own
all-gather and reduce-scatter do not go through redistribution; the TP activations and
gradients do. Rank 0 prints the losses' largest difference, the parameters' largest relative
difference after the last step, the time per step of both runs, and dtensor's stats.

Then a layout torch gets wrong: an MLP whose hidden size (1026) FSDP splits unevenly inside
each TP shard, so the weights are `(_StridedShard(0, 2), Shard(0))`, on the row-major 2x2 mesh
and on one whose ranks are not in row-major order (`[[1, 0], [3, 2]]`, as a topology-ordered
mesh may be), each rank cutting its own pieces (`src_data_rank=None`). `full_tensor()` of every such weight is compared with the weight before
sharding, torch's own and dtensor's: torch's wrong result is recorded, not failed; dtensor's
must be right.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

import dtensor.torch as dt


class Block(nn.Module):
    def __init__(self, dim=512, heads=8, hidden=2048):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1, self.w2 = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        h = self.norm1(x)
        b, s = h.shape[0], h.shape[1]
        # after ColwiseParallel each rank holds its own heads (-1: the local head count)
        q, k, v = (w(h).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        x = x + self.wo(a)
        return x + self.w2(F.gelu(self.w1(self.norm2(x))))


def parallel_block(mesh, seed, hidden=2048, src_data_rank=0):
    torch.manual_seed(seed)
    block = Block(hidden=hidden)
    full = {n: p.detach().clone() for n, p in block.named_parameters()}
    parallelize_module(block, mesh["tp"], {
        "norm1": SequenceParallel(), "norm2": SequenceParallel(),
        "wq": ColwiseParallel(input_layouts=Shard(1)), "wk": ColwiseParallel(input_layouts=Shard(1)),
        "wv": ColwiseParallel(input_layouts=Shard(1)), "wo": RowwiseParallel(output_layouts=Shard(1)),
        "w1": ColwiseParallel(input_layouts=Shard(1)), "w2": RowwiseParallel(output_layouts=Shard(1)),
    }, src_data_rank=src_data_rank)
    fully_shard(block, mesh=mesh["dp"])
    return block, full


def batches(mesh, steps, seed=0):
    """Each dp rank its own data, the same within a tp group; the sequence dim split over tp."""
    g = torch.Generator().manual_seed(seed + 1000 * mesh["dp"].get_local_rank())
    tp, tp_rank = mesh["tp"].size(), mesh["tp"].get_local_rank()
    out = []
    for _ in range(steps):
        x = torch.randn(4, 64, 512, generator=g)
        y = torch.randn(4, 64, 512, generator=g)
        out.append((x.chunk(tp, dim=1)[tp_rank].contiguous(), y.chunk(tp, dim=1)[tp_rank].contiguous()))
    return out


def train(mesh, steps):
    block, _ = parallel_block(mesh, seed=0)
    opt = torch.optim.SGD(block.parameters(), lr=0.05)
    losses, times = [], []
    for x, y in batches(mesh, steps):
        dist.barrier()
        t = time.perf_counter()
        out = block(x)  # the residual stream: local sequence shards (SequenceParallel's convention)
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t)
        total = loss.detach().clone()
        dist.all_reduce(total)  # the mean over all ranks' pieces
        losses.append(float(total) / dist.get_world_size())
    routed = dt.stats()["routed"]  # before the full_tensor() calls below
    params = {n: p.full_tensor().detach() for n, p in block.named_parameters()}
    return losses, params, sorted(times)[len(times) // 2], routed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    torch.use_deterministic_algorithms(True)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    rank = dist.get_rank()
    say = print if rank == 0 else (lambda *a, **k: None)

    losses_t, params_t, step_t, _ = train(mesh, args.steps)
    dt.reset_stats()
    with dt.enabled():
        losses_d, params_d, step_d, routed = train(mesh, args.steps)
    stats = dt.stats()
    loss_diff = max(abs(a - b) for a, b in zip(losses_t, losses_d))
    rel = max(float((params_t[n] - params_d[n]).abs().max() / params_t[n].abs().max().clamp_min(1e-30))
              for n in params_t)
    say(f"losses: first {losses_t[0]:.6f}, last {losses_t[-1]:.6f} (torch) / {losses_d[-1]:.6f} (dtensor)")
    say(f"largest loss difference over {args.steps} steps: {loss_diff:.3g}")
    say(f"largest relative parameter difference after the last step: {rel:.3g}")
    say(f"time per step (median): torch {step_t * 1e3:.1f} ms, dtensor enabled {step_d * 1e3:.1f} ms")
    say(f"dtensor served {routed} redistributions in {args.steps} steps ({routed / args.steps:.1f} per step), "
        f"{stats['routed']} with the final full_tensor() calls, {stats['plan_cache_hits']} of them from cached "
        f"plans; fallbacks: {stats['fallbacks'] or 'none'}")
    ok = True
    if not loss_diff <= 1e-5 * max(abs(v) for v in losses_t):
        say(f"FAIL: losses differ by {loss_diff}")
        ok = False
    if not rel <= 1e-5:
        say(f"FAIL: parameters differ by {rel} (relative)")
        ok = False
    if routed < args.steps:
        say(f"FAIL: dtensor served only {routed} redistributions in {args.steps} steps")
        ok = False

    # the layout torch gets wrong: FSDP's split of an unevenly sized TP shard, on the standard mesh
    # and on one whose ranks are not in row-major order (as a topology-ordered mesh is)
    from torch.distributed.device_mesh import DeviceMesh
    for label, m in [("row-major mesh", mesh),
                     ("mesh ranks [[1, 0], [3, 2]]", DeviceMesh("cpu", torch.tensor([[1, 0], [3, 2]]),
                                                                mesh_dim_names=("dp", "tp")))]:
        # src_data_rank=None: every rank cuts its own pieces by its mesh coordinate (torch's
        # default scatters from rank 0 in process-group order, which on a mesh not in row-major
        # order contradicts torch's own layout rules: docs/torch-defects.md)
        block, full = parallel_block(m, seed=1, hidden=1026, src_data_rank=None)
        strided = [(n, p) for n, p in block.named_parameters()
                   if any(type(q).__name__ == "_StridedShard" for q in p.placements)]
        wrong_torch, wrong_dt = [], []
        for name, p in strided:
            if not torch.equal(p.full_tensor(), full[name]):
                wrong_torch.append(name)
            with dt.enabled():
                if not torch.equal(p.full_tensor(), full[name]):
                    wrong_dt.append(name)
        say(f"uneven hidden 1026, {label}: {len(strided)} weights laid out "
            f"{tuple(strided[0][1].placements) if strided else '-'}; full_tensor() wrong with torch's own "
            f"redistribution: {wrong_torch or 'none'} (recorded, not failed); with dtensor: {wrong_dt or 'none'}")
        if not strided or wrong_dt:
            say("FAIL: dtensor's full_tensor() of the strided weights" + (" is wrong" if strided else ": none found"))
            ok = False
    flag = torch.tensor([0 if ok else 1])
    dist.all_reduce(flag)
    dist.destroy_process_group()
    if int(flag):
        sys.exit(1)
    say("train_fsdp_tp: ok")


if __name__ == "__main__":
    main()
