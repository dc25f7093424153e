"""dtensor.torch.weight_sync on 4 gloo ranks (weight_sync_worker.py): a trainer's DTensors (FSDP x
TP, uneven rows, a replicated norm) into an engine of TP 2 on two of its ranks (fused qkv with the
KV rows on both engine ranks), bf16 and fp8 (per-tensor scales, bit for bit against quantizing the
whole engine tensor in one process; and per 4x4 block of the global fused tensor, blocks spanning
two senders), in one round and under a staging budget; the figures; bad
input refused on every rank before anything is written. The 8-process example with the baselines
is examples/python/weight_sync.py (scripts/python-test.sh runs it)."""
import json

import pytest

from test_redistribute_mp import spawn_fn


def test_weight_sync_exact_and_bad_input(tmp_path):
    import weight_sync_worker
    why = spawn_fn(weight_sync_worker.run, 4, (str(tmp_path),), 240)
    assert not why, why
    rs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    for label in ("bf16", "fp8", "bf16-rounds", "fp8-blocks"):
        assert all(r[label]["equal"] for r in rs), (label, rs)
        assert [r[label]["buffers"] for r in rs] == [0, 0, 3, 3]
        r = rs[0][label]
        assert r["busiest"] <= 1.05 * r["bound"], r
        assert r["local"] > 0  # (the engine ranks hold some of their pieces: not sent)
    assert rs[0]["bf16-rounds"]["rounds"] > 1 and rs[0]["bf16"]["rounds"] == 1
    # fp8 matrices: half the bytes of bf16 on the wire (the norm stays bf16)
    # (bf16 = M + N, fp8 = M / 2 + N for matrix bytes M and norm bytes N: 2 fp8 - bf16 = N, at most
    # two engine ranks x 6 bf16 elements)
    assert 0 <= 2 * rs[0]["fp8"]["wire"] - rs[0]["bf16"]["wire"] <= 2 * 6 * 2, (rs[0]["fp8"], rs[0]["bf16"])
    assert rs[2]["fp8"]["scales"] == ["o", "qkv"] and rs[2]["fp8-blocks"]["scales"] == ["o", "qkv"]
    e = [r["errors"] for r in rs]
    assert all(x["block_no_at"] and "block scales need" in x["block_no_at"] for x in e), e[0]["block_no_at"]
    assert all(x["gap"] and "its parts cover 7 of 12 on dim 0" in x["gap"] for x in e), e[0]["gap"]
    assert all(x["overlap"] and "overlap" in x["overlap"] for x in e), e[0]["overlap"]
    assert all(x["outside"] and "not within the source's shape" in x["outside"] for x in e), e[0]["outside"]
    assert all(x["unknown"] and "'w_missing'" in x["unknown"] for x in e), e[0]["unknown"]
    assert all(x["int_dtype"] and "torch.int32" in x["int_dtype"] for x in e), e[0]["int_dtype"]
    assert all(x["plain_tensor"] and x["plain_tensor"].startswith("TypeError") for x in e), e[0]["plain_tensor"]
    assert all(x["disagree"] and "planned another sync" in x["disagree"] for x in e), e[0]["disagree"]
    assert e[2]["buffer_dtype"] and "buffer 'o'" in e[2]["buffer_dtype"] and all(x["untouched"] for x in e)
    assert all(e[r]["buffer_device"] and "is on meta" in e[r]["buffer_device"] for r in (2, 3)), e[2].get("buffer_device")
    assert all(x["stale"] and "'wq' is not the one planned" in x["stale"] for x in e), e[0]["stale"]
    assert all(x["nan"] and "NaN or Inf" in x["nan"] and "'wk'" in x["nan"] for x in e), e[0]["nan"]


@pytest.mark.parametrize("how", ["dies", "late"])
def test_a_dead_or_late_engine_rank_is_named_within_the_timeout(tmp_path, how):
    import weight_sync_worker
    why = spawn_fn(weight_sync_worker.run_dead_peer, 4, (str(tmp_path), how), 120)
    assert not why, why
    rs = {r: json.loads((tmp_path / f"dead{r}.json").read_text()) for r in range(3)}
    talkers = [r for r, x in rs.items() if x["peer_of_3"]]
    assert talkers, rs
    for r, x in rs.items():
        if x["peer_of_3"]:
            assert x["error"] and x["error"].startswith("BackendError") and "3" in x["error"].split("peer ranks")[1], x
            assert x["seconds"] < 11, x  # (the timeout is 5 s; a late peer comes after 12 s)
        else:
            assert x["error"] is None, x
