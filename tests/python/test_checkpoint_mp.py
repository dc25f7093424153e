"""DCP round trips through dtensor.torch.checkpoint.load (gloo, CPU processes): a checkpoint saved
by plain dcp.save as FSDP2+TP on 4 ranks, loaded with TP on 2 (a _StridedShard target among
others), TP on 2 replicated over 2, and FSDP on 4 -- every dtype dtensor supports, uneven and
empty shards -- every local shard equal bit for bit to the saved tensor's elements it holds, every
saved chunk read by exactly one rank, a plain tensor and a non-tensor entry loaded by DCP's default
path in the same call; users' own dcp.load with dtensor's LoadPlanner and StorageReader; misuse and
bad metadata refused with one clear error; a rank that dies or comes late ending the others with a
dtensor.BackendError naming their peers, within the timeout. With fanout="gather" the replicated
targets are received sharded and gathered inside the mesh, with the same bits; RaggedShard targets
(uneven, empty and single-owner pieces, through load's `ragged`) load exactly beside DTensors."""
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


@pytest.mark.parametrize("case, world, how", [("tp2", 2, "load"), ("rtp", 4, "dcp"), ("fsdp4", 4, "load"),
                                              ("tp2", 2, "gather"), ("rtp", 4, "gather"), ("ragged", 4, "load")])
def test_round_trip(checkpoint, case, world, how):
    r = run_script(HERE / "checkpoint_worker.py", "load", str(checkpoint), str(world), case, how, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    # gather: the replicated targets arrive sharded and one batch inside the mesh gathers them
    gathered = {int(g) for g in re.findall(r"rank \d+: gathered (\d+)", r.stdout)}
    assert len(gathered) == 1 and (min(gathered) > 0 or how != "gather"), r.stdout
    lines = re.findall(r"rank (\d+): (\d+) of (\d+) tensors equal; read (\d+) bytes, busiest (\d+); this rank read "
                       r"(\d+); chunks read (\d+), distinct (\d+), saved (\d+)", r.stdout)
    assert sorted(int(l[0]) for l in lines) == list(range(world)), r.stdout + r.stderr
    for _, equal, total, read, busiest, mine, chunks, distinct, saved in lines:
        assert equal == total == "12"
        # every non-empty saved chunk read, by exactly one rank in all
        assert chunks == distinct == saved
    # the same plan on every rank: one total, one busiest, and the ranks' own reads add up to it
    assert len({l[3] for l in lines}) == 1 and len({l[4] for l in lines}) == 1
    assert sum(int(l[5]) for l in lines) == int(lines[0][3])
    assert max(int(l[5]) for l in lines) == int(lines[0][4])


def test_misuse_and_bad_metadata_are_refused(checkpoint):
    r = run_script(HERE / "checkpoint_worker.py", "load", str(checkpoint), "2", "tp2", "refusals", timeout=180)
    assert r.returncode == 0 and r.stdout.count("refusals ok") == 2, r.stdout + r.stderr


@pytest.mark.parametrize("how", ["dies", "late"])
def test_a_peer_lost_mid_load_ends_the_others(checkpoint, how):
    r = run_script(HERE / "checkpoint_worker.py", "load", str(checkpoint), "4", "fsdp4", how, timeout=180)
    errors = re.findall(r"rank (\d): BackendError after ([\d.]+) s: (.*)", r.stdout)
    assert sorted(int(e[0]) for e in errors) == [0, 1, 2], r.stdout + r.stderr
    assert "loaded without its peer" not in r.stdout
    for _, seconds, text in errors:
        assert float(seconds) < 15, text  # the 4 s timeout, not the process group's 20 s
        assert "dtensor.torch.checkpoint.load" in text, text
    # the ranks waiting on it in the moves name it among their peers
    assert any("peer ranks [" in text and "3]" in text for _, _, text in errors), r.stdout


def _corrupt(src, dst, kind: str) -> str:
    """A copy of the checkpoint with one storage failure; returns the file the readers should name."""
    import pickle
    import shutil
    shutil.copytree(src, dst)
    if kind == "deleted":
        (dst / "__2_0.distcp").unlink()
        return "__2_0.distcp"
    if kind == "truncated":
        f = dst / "__1_0.distcp"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
        return "__1_0.distcp"
    md = pickle.loads((dst / ".metadata").read_bytes())
    chunks = md.state_dict_metadata["big.f32"].chunks  # 33x17 saved [S(0), S(0)]: 9, 8, 8, 8 rows
    index = {k.offset[0]: k for k in md.storage_data if k.fqn == "big.f32"}
    nine = next(c for c in chunks if c.sizes[0] == 9)
    eight = next(c for c in chunks if c.sizes[0] == 8)
    if kind == "noindex":
        del md.storage_data[index[nine.offsets[0]]]
        name = ""
    else:  # "rows": the 9-row chunk's entry points at an 8-row chunk's bytes
        md.storage_data[index[nine.offsets[0]]] = md.storage_data[index[eight.offsets[0]]]
        name = md.storage_data[index[eight.offsets[0]]].relative_path
    (dst / ".metadata").write_bytes(pickle.dumps(md))
    return name


@pytest.mark.parametrize("kind", ["deleted", "truncated", "noindex", "rows"])
def test_a_reader_storage_failure_ends_every_rank_at_once(checkpoint, tmp_path, kind):
    # the readers' storage fails (a file gone or cut short, a chunk without its storage entry, a
    # chunk whose stored rows are fewer than it claims): every rank raises BackendError within 10 s
    # (not the 60 s timeout), naming the same failing rank, the file and the cause; no move starts
    path = tmp_path / "c"
    name = _corrupt(checkpoint, path, kind)
    r = run_script(HERE / "checkpoint_worker.py", "load", str(path), "4", "fsdp4", "corrupt", timeout=180)
    errors = re.findall(r"rank (\d): BackendError after ([\d.]+) s: (.*)", r.stdout)
    assert sorted(int(e[0]) for e in errors) == [0, 1, 2, 3], r.stdout + r.stderr
    named = {re.search(r"rank (\d) could not read", text).group(1) if "could not read" in text else None
             for _, _, text in errors}
    assert len(named) == 1 and None not in named, r.stdout
    cause = {"deleted": "FileNotFoundError", "truncated": "Error", "noindex": "no storage entry for chunk 0",
             "rows": "(mismatch sizes|exceeds dimension size|came back as shape)"}[kind]
    for _, seconds, text in errors:
        assert float(seconds) < 10, text
        assert name in text and re.search(cause, text), text
        assert "no move started" in text, text


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


def test_plan_files_and_storage_overrides():
    mesh = dtensor.Mesh("2x2")
    target = dtensor.Layout(mesh, [8, 6], "RS(0)")
    saved = dtensor.SavedTensor("w", [8, 6], "f32", [([0, 0], [4, 6]), ([4, 0], [4, 6])])
    p = dtensor.plan_load([saved], [target])
    assert (p.read_bw_GBps, p.read_alpha_us) == (2.0, 100.0)
    q = dtensor.plan_load([saved], [target], read_bw_GBps=0.5)
    assert (q.read_bw_GBps, q.read_alpha_us) == (0.5, 100.0) and q.read_us > p.read_us
    # the JSON round trip, validated; an edited file refused by its hash
    assert dtensor.LoadPlan.from_json(p.to_json()) == p
    p.check([saved], [target])
    with pytest.raises(ValueError, match="edited or corrupted"):
        dtensor.LoadPlan.from_json(p.to_json().replace('"elements":24', '"elements":23', 1))
    with pytest.raises(ValueError, match="lacks 'kind'"):
        dtensor.LoadPlan.from_json("{}")
    # a plan of another load: check names the chunk
    other = dtensor.plan_load([saved], [dtensor.Layout(mesh, [8, 6], "S(0)R")])
    with pytest.raises(ValueError, match="tensor w chunk 0"):
        other.check([saved], [target])
    assert "chunk    1 (offsets 4x0 sizes 4x6): read by rank" in p.show([saved], 0)
    # a load request file
    text = '{"tensors": [{"name": "w", "layout": %s, "chunks": [[[0, 0], [4, 6]], [[4, 0], [4, 6]]]}]}' % target.to_json()
    req = dtensor.LoadRequest.from_json(text)
    assert dtensor.plan_load(req.saved, req.targets).hash == p.hash
    # one rank's part, planned alone: its part of the whole plan, the same decision hash
    for r in range(4):
        part = dtensor.plan_load_part(req.saved, req.targets, r)
        assert part == p.part(r) and part.decision_hash == p.decision_hash and part.rank == r
        assert all(r in (m[2], m[3]) for m in part.plan.messages) and all(x[2] == r for x in part.plan.reads)
    assert sum(len(dtensor.plan_load_part(req.saved, req.targets, r).plan.reads) for r in range(4)) == len(p.reads)
    with pytest.raises(ValueError, match="rank 4 is not on the load's mesh"):
        dtensor.plan_load_part(req.saved, req.targets, 4)
    with pytest.raises(ValueError, match="tensor w chunk 0: a chunk is"):
        dtensor.LoadRequest.from_json(text.replace("[[0, 0], [4, 6]]", "[[0, 0]]", 1))


def test_fanout_plans_and_tampered_parts():
    """The fan-out in plans and in the parts the coordinator sends: a part is untrusted, its staged
    tensors and post batch are checked against the rank's own targets before a buffer is sized."""
    from dtensor.torch._load_moves import Target, check_part, split_plan
    mesh = dtensor.Mesh("2x2")
    target = dtensor.Layout(mesh, [8, 6], "RS(0)")
    saved = dtensor.SavedTensor("w", [8, 6], "f32", [([0, 0], [4, 6]), ([4, 0], [4, 6])])
    direct = dtensor.plan_load([saved], [target], fanout="direct")
    gather = dtensor.plan_load([saved], [target], fanout="gather")
    assert list(direct.staged) == [] and list(gather.staged) == [0]
    assert gather.post.plans[0].dst == target and gather.post_us > 0
    assert gather.total_us == pytest.approx(gather.read_us + gather.transfer_us + gather.post_us)
    assert dtensor.LoadPlan.from_json(gather.to_json()) == gather
    gather.check([saved], [target])
    assert "fan-out: 1 tensor(s) received sharded" in gather.explain()
    with pytest.raises(ValueError, match="fan-out 'x'|fan-out \"x\""):
        dtensor.plan_load([saved], [target], fanout="x")
    targets = [Target("w", None, saved, target)]
    for r, part in enumerate(split_plan(gather, 4)):
        reads, messages, post = check_part(part, targets, r, 4)
        assert post is not None and targets[0].received == gather.post.plans[0].src
        assert sum(m[4] for m in messages if m[3] == r) == targets[0].received.local_numel(r)
    # a direct part points the target back at its own layout
    reads, messages, post = check_part(split_plan(direct, 4)[0], targets, 0, 4)
    assert post is None and targets[0].received is target

    def tampered(**change):
        part = split_plan(gather, 4)[1]
        part.update(change)
        return part
    other = dtensor.plan_batch([(dtensor.Layout(mesh, [8, 6], "S(0)S(0)"), dtensor.Layout(mesh, [8, 6], "S(0)R"))])
    cases = [(dict(post=other.to_json()), "the post plan ends in"),
             (dict(staged=[]), "empty exactly when 'post' is None"),
             (dict(staged=[3]), "staged tensor 3 is out of range"),
             (dict(post="{}"), "batch plan"),
             (dict(post=7), "not a batch plan's JSON")]
    for change, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            check_part(tampered(**change), targets, 1, 4)
