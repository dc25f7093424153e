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
