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
    """`python path args...` with a fresh rendezvous port; stdout and stderr captured as text."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return subprocess.run([sys.executable, str(path), *args], env=env, capture_output=True, text=True, timeout=timeout)
