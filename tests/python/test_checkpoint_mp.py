"""DCP round trips through dtensor.torch.checkpoint.load (gloo, CPU processes): a checkpoint saved
by plain dcp.save as FSDP2+TP on 4 ranks, loaded with TP on 2 (a _StridedShard target among
others), TP on 2 replicated over 2, and FSDP on 4 -- every dtype dtensor supports, uneven and
empty shards -- every local shard equal bit for bit to the saved tensor's elements it holds."""
import re

import pytest

import dtensor
from procs import run_script
from pathlib import Path

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "c"
    r = run_script(HERE / "checkpoint_worker.py", "save", str(path), "4", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("saved") == 4
    return path


@pytest.mark.parametrize("case, world", [("tp2", 2), ("rtp", 4), ("fsdp4", 4)])
def test_round_trip(checkpoint, case, world):
    r = run_script(HERE / "checkpoint_worker.py", "load", str(checkpoint), str(world), case, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = re.findall(r"rank (\d+): (\d+) of (\d+) tensors equal; read (\d+) bytes, busiest (\d+)", r.stdout)
    assert sorted(int(l[0]) for l in lines) == list(range(world)), r.stdout + r.stderr
    for _, equal, total, read, busiest in lines:
        assert equal == total == "12"
    # every saved byte read once in all (the same plan on every rank)
    assert len({l[3] for l in lines}) == 1


def test_bad_metadata_names_the_tensor_and_chunk():
    mesh = dtensor.Mesh("2")
    target = dtensor.Layout(mesh, [4, 4], "S(0)")
    good = dtensor.SavedTensor("w", [4, 4], "f32", [([0, 0], [2, 4]), ([2, 0], [2, 4])])
    p = dtensor.plan_load([good], [target])
    assert p.total_read_bytes == 64 and sorted(r[2] for r in p.reads) == [0, 1] and p.moved_bytes == 0
    assert "each read once" in p.explain()
    with pytest.raises(ValueError, match=r"tensor w: chunk 0 \(offsets 0x0 sizes 2x4\) overlaps chunk 1"):
        dtensor.plan_load([dtensor.SavedTensor("w", [4, 4], "f32", [([0, 0], [2, 4]), ([1, 0], [2, 4]), ([3, 0], [0, 4])])],
                          [target])
    with pytest.raises(ValueError, match="the chunks cover 8 of its 16 elements"):
        dtensor.plan_load([dtensor.SavedTensor("w", [4, 4], "f32", [([0, 0], [2, 4])])], [target])
    with pytest.raises(ValueError, match="saved as bf16"):
        dtensor.plan_load([dtensor.SavedTensor("w", [4, 4], "bf16", [([0, 0], [4, 4])])], [target])
