"""python -m dtensor.tune measure | fit | validate under torchrun on gloo (world 4): the logs
`fit` reads, a fitted profile, and the ranking report (every plan's output verified, the regret
what the medians give, text/JSON/HTML); bad input is one `error:` line with exit 2; a rank that
never comes ends the others within the timeout with dtensor's BackendError."""
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dtensor
import dtensor.tune
from procs import free_port, run_script

HERE = Path(__file__).parent


def tune(*args, nproc=None, timeout=240):
    cmd = [sys.executable]
    if nproc:
        cmd += ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(free_port())]
    cmd += ["-m", "dtensor.tune", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env["MASTER_PORT"] = str(free_port())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_measure_fit_validate_under_torchrun(tmp_path):
    logs = tmp_path / "logs"
    r = tune("measure", "--backend", "gloo", "--mesh", "2x2", "--devices-per-host", "2", "--sizes", "1K:32K",
             "--iters", "1", "-o", str(logs), nproc=4)
    assert r.returncode == 0, r.stderr
    written = sorted(p.name for p in logs.iterdir())
    assert written == sorted(f"{c}-{link}.txt" for c in ("all_gather", "reduce_scatter", "all_reduce", "alltoall", "sendrecv")
                             for link in ("intra", "inter"))
    for p in logs.iterdir():
        log = dtensor.tune.read_nccl_log(p)
        assert log.ranks == 2 and len(log.rows) >= 4
        assert log.ranks_per_node == (1 if "inter" in p.name else 2)
    profile = tmp_path / "fitted.json"
    r = tune("fit", *map(str, sorted(logs.iterdir())), "-o", str(profile), "--report", str(tmp_path / "fit.html"))
    assert r.returncode == 0, r.stderr
    assert f"wrote {profile}" in r.stdout
    fitted = dtensor.CostModel.load(str(profile))
    assert fitted.devices_per_host == 2
    # the CLI's report, from the same function (tune::fit_text)
    assert "all_gather on the intra-node link, fitted at 2 ranks" in r.stdout
    report = tmp_path / "validate.html"
    r = tune("validate", "--backend", "gloo", "--mesh", "2x2", "--profile", str(profile), "--against", "default",
             "--bytes", "4K", "--max-rounds", "8", "--format", "json", "--report", str(report), nproc=4)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["mesh"] == "2x2" and j["backend"] == "torch.distributed gloo" and j["clock"] == "wall clock"
    assert j["others"] == ["default"]
    assert [c["name"] for c in j["cases"]] == [f"{n} 4 KiB" for n in (
        "fsdp-tp unshard", "fsdp-tp grad reduce-scatter", "shard-order change", "partial -> replicate", "partial -> shard",
        "transpose", "layer unshard (4 tensors)", "cross-mesh to a flat mesh")]
    labels = set()
    for c in j["cases"]:
        plans = c["plans"]
        assert plans[0]["chosen"] and not any(p["chosen"] for p in plans[1:])
        assert all(p["verified"] for p in plans)
        assert c["rounds"] == 8
        for p in plans:
            assert p["q1_us"] <= p["median_us"] <= p["q3_us"]
            labels.update([p["label"], *p["also"]])
        fastest = min(p["median_us"] for p in plans)
        assert c["regret"] == pytest.approx(plans[0]["median_us"] / fastest - 1)
    assert {"chosen", "runner-up", "pytorch edges", "best under default", "per-tensor", "point-to-point"} <= labels
    assert j["max_regret"] == pytest.approx(max(c["regret"] for c in j["cases"]))
    # 4 ranks on a host with fewer cores: the report says the times say little
    assert bool(j["note"]) == (4 > (os.cpu_count() or 0))
    html = report.read_text()
    assert html.count("&#9733; chosen") >= 8 and "Plan ranking: profile" in html


def test_cases_file_on_a_world_of_one(tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"version": 1, "mesh": [1], "pairs": [
        {"shape": [8, 4], "dtype": "f32", "from": "S(0)", "to": "R"},
        {"shape": [6], "dtype": "bf16", "from": "P(sum)", "to": "S(0)"}]}))
    r = tune("validate", "--backend", "gloo", "--cases", str(cases), "--max-rounds", "8")
    assert r.returncode == 0, r.stderr
    assert "pair 0  (8x4 f32: S(0) -> R)" in r.stdout and "batch (2 tensors)" in r.stdout
    assert "3 of 3 cases run" in r.stdout


@pytest.mark.parametrize("args, message", [
    (("validate", "--mesh", "2", "--bytes", "8"), "error: --bytes '8': validate size 8 bytes: from 64 bytes to 16 GiB"),
    (("validate", "--bytes", "lots"), "error: --bytes 'lots' is not a byte size"),
    (("validate", "--bytes", "99999999999999999999G"), "error: --bytes '99999999999999999999G' is too large"),
    (("validate", "--bytes", "1K", "--sim-memory-limit", "0x10"), "error: --sim-memory-limit '0x10' is not a byte size"),
    (("validate", "--min-rounds", "2"), "error: min rounds 2 is below 8"),
    (("validate", "--against", "/nonexistent.json"), "error: "),
    (("validate", "--profile", "/nonexistent.json"), "error: "),
    (("validate", "--cases", "/nonexistent.json"), "error: --cases '/nonexistent.json' cannot be read"),
    (("measure", "--sizes", "1K", "-o", "x"), "error: --sizes '1K' must be MIN:MAX"),
    (("fit", "/nonexistent.txt", "-o", "p.json"), "error: "),
])
def test_bad_input_is_one_error(capsys, args, message):
    # refused before any process group is made: in this process
    from dtensor.tune.__main__ import main
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    import torch.distributed as dist
    assert not dist.is_initialized()


def test_host_memory_is_bounded_before_allocating():
    # 8 GiB tensors on a world of one: refused by the host-memory bound on every rank, exit 2,
    # before any buffer (not a raw RuntimeError from an allocation)
    r = tune("validate", "--backend", "gloo", "--bytes", "8G")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert re.match(r"error: validate: case '[^']+' \(\d+ plans\) needs about \d+ bytes of host memory "
                    r"on this host's 1 ranks, above the limit of \d+ bytes", r.stderr), r.stderr
    r = tune("validate", "--backend", "gloo", "--bytes", "1M", "--sim-memory-limit", "1M")
    assert r.returncode == 2 and "above the limit of 1048576 bytes" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_mesh_the_job_does_not_have():
    r = tune("validate", "--backend", "gloo", "--mesh", "2x2")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("error: --mesh 2x2 has 4 ranks but the job has 1 processes"), r.stderr
    assert "Traceback" not in r.stderr


def test_a_rank_that_never_comes_ends_the_other_within_the_timeout():
    r = run_script(HERE / "tune_worker.py", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: BackendError after" in r.stdout, r.stdout + r.stderr
