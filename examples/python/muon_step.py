"""A Muon optimizer step on FSDP-sharded weights, with one owner per matrix.

Muon orthogonalises each weight matrix's momentum with a Newton-Schulz iteration, which needs the
whole matrix. The weights here are stored FSDP-style, rows split over the ranks (Shard(0), uneven
sizes included). Each step, per matrix: the momentum shards are gathered to one owner (a
single-owner RaggedShard layout: dtensor.owner_layout), the owner alone runs Newton-Schulz, and
the update is scattered back to the row shards. dtensor.plan_owners picks the owners (the largest
per-rank time, receive time plus Newton-Schulz compute, made as small as it can: LPT, exact for
up to 12 matrices); every redistribution is a dtensor ragged plan run over torch.distributed.

Compared, on the same weights and gradients:
  owners       plan_owners' owners: receive time plus Newton-Schulz compute (compute="newton_schulz")
  bytes-only   plan_owners' owners priced by receive time alone
  round-robin  matrix i on rank i % world
  all-gather   every rank gathers every matrix and orthogonalises all of them
and checked against a one-process reference (every rank recomputes it from the full tensors):
the updated weights must equal it to fp32 rounding.

    torchrun --nproc-per-node 4 examples/python/muon_step.py              # CPU, gloo
    torchrun --nproc-per-node 8 examples/python/muon_step.py --steps 5

Rank 0 prints one line per strategy: bytes moved (all ranks), the busiest rank's bytes, the
median wall time of a step, the largest Newton-Schulz load on one rank (matrices' flops), and the
largest difference from the reference.
"""
import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

import dtensor
import dtensor.torch as dt

# (rows, cols): a small transformer block's matrices, d_model 96, MLP 4x; 97 and 50 rows are uneven
SHAPES = [(96, 96), (96, 96), (96, 96), (96, 96), (384, 96), (96, 384), (97, 96), (50, 96)]


def newton_schulz(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """Muon's quintic Newton-Schulz iteration: an approximately orthogonal matrix from g."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (g.norm() + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    return x.T if tall else x


def ns_flops(rows: int, cols: int, steps: int = 5) -> float:
    m, n = min(rows, cols), max(rows, cols)
    return steps * (2 * m * m * n + 2 * m * m * m + 2 * m * m * n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6, help="steps per strategy; the first is not timed")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--momentum", type=float, default=0.95)
    ap.add_argument("--gflops", type=float, default=20.0, help="the compute rate plan_owners assumes per rank")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = init_device_mesh("cpu", (world,))
    core_mesh = dt._mesh_info(mesh).mesh
    _, coord = dt._mesh_info(mesh).my_coord()

    torch.manual_seed(0)
    full_w = [torch.randn(s, dtype=torch.float32) for s in SHAPES]
    shard = [dtensor.Layout(core_mesh, list(s), "S(0)") for s in SHAPES]
    repl = [dtensor.Layout(core_mesh, list(s), "R") for s in SHAPES]

    def rows_of(i: int, t: torch.Tensor) -> torch.Tensor:
        runs = shard[i].owned_runs(coord)[0]  # dim 0: one run of rows (none on an empty shard)
        return torch.cat([t[a:b] for a, b in runs]) if runs else t[:0].clone()

    # owners priced by receive time plus the Newton-Schulz compute dtensor derives from the shapes
    # (5 iterations at --gflops), against owners priced by the bytes they receive alone
    chosen = dtensor.plan_owners(shard, 0, compute="newton_schulz", iterations=5, flops_per_us=args.gflops * 1e3).owners
    derived = dtensor.newton_schulz_us(shard, 5, args.gflops * 1e3)
    assert all(abs(a - ns_flops(*s) / (args.gflops * 1e3)) <= 1e-9 * a for a, s in zip(derived, SHAPES)), derived
    bytes_only = dtensor.plan_owners(shard, 0).owners
    strategies = {
        "owners": list(chosen),
        "bytes-only": list(bytes_only),
        "round-robin": [i % world for i in range(len(SHAPES))],
        "all-gather": None,
    }
    itemsize = 4
    report = {}
    for name, owners in strategies.items():
        w = [rows_of(i, full_w[i]) for i in range(len(SHAPES))]
        mom = [torch.zeros_like(x) for x in w]
        ref_w = [x.clone() for x in full_w]
        ref_m = [torch.zeros_like(x) for x in full_w]
        times, moved, busiest, ns_load = [], 0, 0, 0.0
        per_rank = [0] * world
        for step in range(args.steps):
            gen = torch.Generator().manual_seed(1000 + step)
            grads = [torch.randn(s, generator=gen) for s in SHAPES]  # the same full gradient on every rank
            dist.barrier()
            t0 = time.perf_counter()
            for i in range(len(SHAPES)):
                mom[i].mul_(args.momentum).add_(rows_of(i, grads[i]))
                if owners is None:  # every rank gathers the whole matrix and orthogonalises it
                    full = dt.redistribute_local(mom[i], mesh, shard[i], repl[i])
                    upd = rows_of(i, newton_schulz(full))
                else:
                    own = dtensor.owner_layout(shard[i], 0, owners[i])
                    full_or_empty = dt.redistribute_local(mom[i], mesh, shard[i], own)
                    res = newton_schulz(full_or_empty) if coord[0] == owners[i] else full_or_empty
                    upd = dt.redistribute_local(res, mesh, own, shard[i])
                w[i].add_(upd, alpha=-args.lr)
            dist.barrier()
            if step > 0:  # step 0 also plans and prepares each redistribution (cached after): not timed
                times.append(time.perf_counter() - t0)
            # the reference, in one process (every rank: it has the full tensors)
            for i in range(len(SHAPES)):
                ref_m[i].mul_(args.momentum).add_(grads[i])
                ref_w[i].add_(newton_schulz(ref_m[i]), alpha=-args.lr)
        # bytes: per rank, what each redistribution delivers from other ranks (the same every step)
        for i, s in enumerate(SHAPES):
            src = dtensor.RaggedLayout(shard[i])
            if owners is None:
                counts = dtensor.exchange_received(src, dtensor.RaggedLayout(repl[i]))
                ns_load += ns_flops(*s)
            else:
                own = dtensor.owner_layout(shard[i], 0, owners[i])
                gather = dtensor.exchange_received(src, own)
                scatter = dtensor.exchange_received(own, src)
                counts = [g + t for g, t in zip(gather, scatter)]
            for r in range(world):
                per_rank[r] += counts[r] * itemsize * args.steps
        if owners is not None:
            load = [0.0] * world
            for i, s in enumerate(SHAPES):
                load[owners[i]] += ns_flops(*s)
            ns_load = max(load)
        moved, busiest = sum(per_rank), max(per_rank)
        diff = max(float((w[i] - rows_of(i, ref_w[i])).abs().max()) for i in range(len(SHAPES)))
        scale = max(float(x.abs().max()) for x in ref_w)
        diffs = [0.0] * world
        dist.all_gather_object(diffs, diff)
        report[name] = (moved, busiest, statistics.median(times), ns_load, max(diffs), scale)

    ok = all(r[4] <= 1e-6 * r[5] for r in report.values())
    if rank == 0:
        print(f"Muon step, {len(SHAPES)} matrices {SHAPES}, world {world}, {args.steps} steps; "
              f"owners chosen by plan_owners: {chosen}")
        print(f"{'strategy':<12} {'bytes moved':>12} {'busiest rank':>13} {'step ms':>9} {'NS GFLOP max':>13} {'max |diff|':>11}")
        for name, (moved, busiest, t, load, d, _) in report.items():
            print(f"{name:<12} {moved:>12} {busiest:>13} {t * 1e3:>9.2f} {load / 1e9:>13.3f} {d:>11.2e}")
        print("updated weights equal the one-process reference to fp32 rounding" if ok else
              "MISMATCH: a strategy's weights differ from the reference")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
