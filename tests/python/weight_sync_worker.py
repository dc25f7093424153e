"""Worker of test_weight_sync_mp.py: world 4 (gloo), a trainer mesh 2x2 on every rank (FSDP x TP:
colwise Shard(0)Shard(0), rowwise Shard(0)Shard(1), a norm replicated over TP), an engine of TP 2
on ranks 2 and 3 (overlapping the trainer: some pieces are already there). Writes rank{r}.json."""
import datetime
import json

import torch
import torch.distributed as dist


def run(rank, world, port, out_dir):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    import dtensor.torch.weight_sync as ws

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    mesh = DeviceMesh("cpu", [[0, 1], [2, 3]])
    gen = torch.Generator().manual_seed(3)
    # uneven rows (FSDP's split leaves a short shard), a replicated norm
    full = {"wq": torch.randn(14, 6, generator=gen), "wk": torch.randn(5, 6, generator=gen),
            "wo": torch.randn(6, 14, generator=gen), "norm": torch.randn(6, generator=gen)}
    full = {n: t.to(torch.bfloat16) for n, t in full.items()}
    pl = {"wq": (Shard(0), Shard(0)), "wk": (Shard(0), Shard(0)), "wo": (Shard(0), Shard(1)), "norm": (Shard(0), Replicate())}
    state = {n: distribute_tensor(full[n], mesh, pl[n], src_data_rank=None) for n in full}
    res = {}

    def spec_of(mat, engine=(2, 3), block=None):
        # (with block scales: the global qkv is [wq; wk] (19 x 6), wk's rows on both engine ranks;
        # the global o is wo)
        out = {}
        for j, r in enumerate(engine):
            out[r] = [ws.Buffer("qkv", (7 + 5, 6), mat, (ws.Part("wq", ((7 * j, 7 * j + 7), (0, 6)), at=(7 * j, 0)),
                                                          ws.Part("wk", ((0, 5), (0, 6)), offset=7, at=(14, 0))),
                                block=block),
                      ws.Buffer("o", (6, 7), mat, (ws.Part("wo", ((0, 6), (7 * j, 7 * j + 7)), dim=1, at=(0, 7 * j)),),
                                block=block),
                      ws.Buffer("norm", (6,), torch.bfloat16, (ws.Part("norm", ((0, 6),)),))]
        return out

    def expected_blocks(spec):
        """Block scales: each engine tensor assembled whole in one process (every part at its
        `at`), quantized per block, then cut into the ranks' buffers."""
        glob = {}
        for bufs in spec.values():
            for b in bufs:
                if b.block is None:
                    continue
                ext = glob.get(b.name, (None, [0] * len(b.shape)))[1]
                for p in b.parts:
                    for d in range(len(ext)):
                        ext[d] = max(ext[d], p.at[d] + p.box[d][1] - p.box[d][0])
                glob[b.name] = (b.block, ext)
        q = {}
        for name, (block, ext) in glob.items():
            if block is None:
                continue
            g = torch.zeros(ext, dtype=torch.float32)
            for bufs in spec.values():
                for b in bufs:
                    if b.name == name:
                        for p in b.parts:
                            v = full[p.source][tuple(slice(a, z) for a, z in p.box)].float()
                            g[tuple(slice(o, o + n) for o, n in zip(p.at, v.shape))] = v
            nb = [-(-z // block) for z in ext]
            pad = torch.zeros([n * block for n in nb])
            pad[tuple(slice(0, z) for z in ext)] = g.abs()
            amax = pad.view(nb[0], block, nb[1], block).amax(dim=(1, 3))
            scale = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
            s_full = scale.repeat_interleave(block, 0).repeat_interleave(block, 1)[:ext[0], :ext[1]]
            q[name] = (g / s_full).clamp(-448, 448).to(torch.float8_e4m3fn)
        out = {}
        for b in spec.get(rank, []):
            t = torch.empty(b.shape, dtype=b.dtype)
            for p in b.parts:
                if b.block is not None:
                    n = [z - a for a, z in p.box]
                    v = q[b.name][tuple(slice(o, o + k) for o, k in zip(p.at, n))]
                else:
                    v = full[p.source][tuple(slice(a, z) for a, z in p.box)]
                t.narrow(p.dim, p.offset, v.shape[p.dim]).copy_(v)
            out[b.name] = t
        return out

    def expected(spec):
        if any(b.block is not None for bufs in spec.values() for b in bufs):
            return expected_blocks(spec)
        amax = {}
        for bufs in spec.values():
            for b in bufs:
                for p in b.parts:
                    v = full[p.source][tuple(slice(a, z) for a, z in p.box)].float().abs().max()
                    amax[b.name] = max(amax.get(b.name, torch.tensor(0.0)), v)
        out = {}
        for b in spec.get(rank, []):
            t = torch.empty(b.shape, dtype=b.dtype)
            for p in b.parts:
                v = full[p.source][tuple(slice(a, z) for a, z in p.box)]
                if b.dtype == torch.float8_e4m3fn:
                    v = (v.float() / (amax[b.name] / 448)).clamp(-448, 448).to(torch.float8_e4m3fn)
                t.narrow(p.dim, p.offset, v.shape[p.dim]).copy_(v)
            out[b.name] = t
        return out

    for label, mat, staging, block in (("bf16", torch.bfloat16, None, None), ("fp8", torch.float8_e4m3fn, None, None),
                                       ("bf16-rounds", torch.bfloat16, 64, None),
                                       ("fp8-blocks", torch.float8_e4m3fn, None, 4)):
        spec = spec_of(mat, block=block)
        plan = ws.plan_sync(state, spec, staging_bytes=staging)
        bufs = {b.name: torch.zeros(b.shape, dtype=b.dtype) for b in spec.get(rank, [])}
        out = ws.sync(plan, state, bufs)
        want = expected(spec)
        res[label] = {"equal": all(torch.equal(bufs[n].view(torch.uint8), want[n].view(torch.uint8)) for n in bufs),
                      "buffers": len(bufs), "rounds": plan.rounds, "wire": plan.wire_bytes, "local": plan.local_bytes,
                      "busiest": plan.busiest_sender_bytes, "bound": plan.sender_bound_bytes,
                      "scales": sorted(out["scales"])}
    # bad input: every rank raises the same error
    errors = {}

    def error_of(f):
        try:
            f()
        except (ValueError, TypeError) as e:
            return f"{type(e).__name__}: {e}"
        return None

    good = spec_of(torch.bfloat16)
    gap = {r: [ws.Buffer("qkv", (12, 6), torch.bfloat16, (ws.Part("wq", ((0, 7), (0, 6))),))] for r in good}
    overlap = {r: [ws.Buffer("qkv", (12, 6), torch.bfloat16, (ws.Part("wq", ((0, 7), (0, 6))),
                                                              ws.Part("wk", ((0, 5), (0, 6)), offset=6)))] for r in good}
    outside = {r: [ws.Buffer("o", (6, 7), torch.bfloat16, (ws.Part("wo", ((0, 6), (10, 17)), dim=1),))] for r in good}
    unknown = {r: [ws.Buffer("o", (6, 7), torch.bfloat16, (ws.Part("w_missing", ((0, 6), (0, 7)), dim=1),))] for r in good}
    int_dtype = {r: [ws.Buffer("o", (6, 7), torch.int32, (ws.Part("wo", ((0, 6), (0, 7)), dim=1),))] for r in good}
    no_at = {r: [ws.Buffer("o", (6, 7), torch.float8_e4m3fn, (ws.Part("wo", ((0, 6), (0, 7)), dim=1),), block=4)]
             for r in good}
    errors["block_no_at"] = error_of(lambda: ws.plan_sync(state, no_at))
    errors["gap"] = error_of(lambda: ws.plan_sync(state, gap))
    errors["overlap"] = error_of(lambda: ws.plan_sync(state, overlap))
    errors["outside"] = error_of(lambda: ws.plan_sync(state, outside))
    errors["unknown"] = error_of(lambda: ws.plan_sync(state, unknown))
    errors["int_dtype"] = error_of(lambda: ws.plan_sync(state, int_dtype))
    errors["plain_tensor"] = error_of(lambda: ws.plan_sync({"wq": full["wq"]}, {}))
    # ranks that pass another spec: every rank fails, naming them
    errors["disagree"] = error_of(lambda: ws.plan_sync(state, spec_of(torch.bfloat16, (2, 3) if rank else (3, 2))))
    # a buffer of the wrong dtype at sync time: refused before anything is written
    plan = ws.plan_sync(state, good)
    bufs = {b.name: torch.zeros(b.shape, dtype=b.dtype) for b in good.get(rank, [])}
    if "o" in bufs:
        bufs["o"] = torch.zeros(6, 7, dtype=torch.float32)
    errors["buffer_dtype"] = error_of(lambda: ws.sync(plan, state, bufs)) if rank in good else None
    errors["untouched"] = all(not t.any() for t in bufs.values())
    if rank in good:  # a buffer on another device
        on_meta = {b.name: torch.zeros(b.shape, dtype=b.dtype) for b in good[rank]}
        on_meta["o"] = torch.empty(on_meta["o"].shape, dtype=on_meta["o"].dtype, device="meta")
        errors["buffer_device"] = error_of(lambda: ws.sync(plan, state, on_meta))
        errors["untouched"] = errors["untouched"] and all(not t.any() for n, t in on_meta.items() if n != "o")
    # a parameter changed since planning (another layout): refused
    moved = dict(state, wq=distribute_tensor(full["wq"], mesh, (Shard(1), Shard(0)), src_data_rank=None))
    errors["stale"] = error_of(lambda: ws.sync(plan, moved, {b.name: torch.zeros(b.shape, dtype=b.dtype)
                                                             for b in good.get(rank, [])}))
    # NaN in a parameter to quantize: every rank raises, naming it
    nan = dict(full)
    nan["wk"] = nan["wk"].clone()
    nan["wk"][4, 5] = float("nan")
    nstate = dict(state, wk=distribute_tensor(nan["wk"], mesh, pl["wk"], src_data_rank=None))
    fp8 = spec_of(torch.float8_e4m3fn)
    fplan = ws.plan_sync(nstate, fp8)
    errors["nan"] = error_of(lambda: ws.sync(fplan, nstate, {b.name: torch.zeros(b.shape, dtype=b.dtype)
                                                             for b in fp8.get(rank, [])}))
    res["errors"] = errors
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def run_dead_peer(rank, world, port, out_dir, how="dies"):
    """Rank 3 (an engine rank) exits after planning ("dies"), or comes 12 s late ("late"): every
    rank that exchanges with it raises dtensor.BackendError naming it within the sync's timeout
    (5 s); the others finish."""
    import os
    import time

    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Shard, distribute_tensor

    import dtensor.torch.weight_sync as ws

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    mesh = DeviceMesh("cpu", [[0, 1], [2, 3]])
    full = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
    state = {"w": distribute_tensor(full, mesh, (Shard(0), Shard(1)), src_data_rank=None)}
    spec = {r: [ws.Buffer("w", (8, 6), torch.float32, (ws.Part("w", ((0, 8), (0, 6))),))] for r in (2, 3)}
    plan = ws.plan_sync(state, spec)
    if rank == 3 and how == "dies":
        os._exit(0)
    if rank == 3:  # late: the others have given up by the time it comes; it is not judged
        time.sleep(12)
        try:
            ws.sync(plan, state, {"w": torch.zeros(8, 6)}, timeout=datetime.timedelta(seconds=5))
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)
    me_and_3 = any((plan.sender_of(e, j) == rank and r == 3) or (plan.sender_of(e, j) == 3 and r == rank)
                   for e, (r, _, _, k, _) in enumerate(plan.entries) for j in range(len(plan.pieces[k])))
    bufs = {"w": torch.zeros(8, 6)} if rank == 2 else {}
    t0 = time.perf_counter()
    try:
        ws.sync(plan, state, bufs, timeout=datetime.timedelta(seconds=5))
        error = None
    except Exception as e:  # noqa: BLE001 (recorded, judged by the test)
        error = f"{type(e).__name__}: {e}"
    with open(f"{out_dir}/dead{rank}.json", "w") as f:
        json.dump({"error": error, "seconds": time.perf_counter() - t0, "peer_of_3": me_and_3}, f)
    os._exit(0)
