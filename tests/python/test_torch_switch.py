"""dtensor.torch's drop-in switch (enable / disable / enabled, fallbacks, stats), its fast path,
aliasing and errors, on one gloo rank in a fresh process (tests/python/switch_checks.py)."""
import os
import re
import sys

import pytest

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import switch_checks  # noqa: E402
from procs import run_script  # noqa: E402

NAMES = [fn.__name__ for fn in switch_checks.checks]


@pytest.fixture(scope="module")
def outcome():
    r = run_script(os.path.join(HERE, "switch_checks.py"), timeout=300)
    found = dict(re.findall(r"^CHECK (\w+) (ok|FAIL.*)$", r.stdout, re.M))
    return r, found


def test_process_exits_cleanly(outcome):
    r, found = outcome
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert sorted(found) == sorted(NAMES), r.stdout[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_switch(outcome, name):
    r, found = outcome
    assert name in found, f"check {name} did not report:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert found[name] == "ok", found[name]
