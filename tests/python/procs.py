"""Running a test's ranks in fresh processes: a free local port for the rendezvous, and a Python
script run with MASTER_ADDR/MASTER_PORT set (its ranks started by torch.multiprocessing)."""
import os
import socket
import subprocess
import sys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_script(path, *args, timeout: float) -> subprocess.CompletedProcess:
    """`python path args...` with a fresh rendezvous port; stdout and stderr captured as text. On
    timeout the script's whole process group is killed (its spawned ranks hold the output pipes:
    killing the script alone would leave the wait for them unbounded) and TimeoutExpired raised
    with what it printed."""
    import signal
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    with subprocess.Popen([sys.executable, str(path), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            raise subprocess.TimeoutExpired(p.args, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def run_rank_script(tmp_path, script: str, *args, ok: str, timeout: float) -> None:
    """Writes `script` (a test's multi-process program) under tmp_path, runs it with `args`, and
    asserts it exited 0 and printed `ok` (rank 0's line after every rank's checks passed)."""
    path = tmp_path / "ranks.py"
    path.write_text(script)
    r = run_script(path, *args, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ok in r.stdout, r.stdout + r.stderr
