"""Fitting dtensor's cost model to nccl-tests measurements, as `dtensor tune fit` does.

    import dtensor, dtensor.tune
    result = dtensor.tune.fit(["all_gather.log", "all_reduce.log"])
    open("mycluster.json", "w").write(result.model.to_json())
    dtensor.plan(src, dst, cost_model=result.model)
"""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from ._core import CostModel
from ._core.tune import Log, LogFit, ProfileFit, fit_profile, parse_nccl_log

__all__ = ["Log", "LogFit", "ProfileFit", "fit", "fit_profile", "parse_nccl_log", "read_nccl_log"]

_MAX_LOG_BYTES = 64 << 20


def read_nccl_log(path: Union[str, os.PathLike], *, collective: Optional[str] = None, ranks: Optional[int] = None,
                  ranks_per_node: Optional[int] = None) -> Log:
    """Reads and parses one nccl-tests log file (ValueError naming the file for what it cannot read)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"a log path must be a str or os.PathLike, not {type(path).__name__}")
    path = os.fsdecode(path)
    if not os.path.isfile(path):
        raise ValueError(f"log {path!r} does not exist or is not a regular file")
    try:
        if os.path.getsize(path) > _MAX_LOG_BYTES:
            raise ValueError(f"log {path!r} is larger than {_MAX_LOG_BYTES} bytes")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:  # unreadable (permissions, a directory race, I/O): one clear error naming the file
        raise ValueError(f"log {path!r} cannot be read: {e.strerror or e}") from None
    return parse_nccl_log(text, path, collective, ranks, ranks_per_node)


def fit(paths: Sequence[Union[str, os.PathLike]], *, base: Union[str, CostModel] = "default",
        collective: Optional[str] = None, ranks: Optional[int] = None,
        ranks_per_node: Optional[int] = None) -> ProfileFit:
    """Fits one curve per log (one log per collective and link class) onto `base`'s links:
    `.model` is the fitted CostModel, `.logs` the per-log reports (rows used, bands, errors,
    ignored rows)."""
    logs = [read_nccl_log(p, collective=collective, ranks=ranks, ranks_per_node=ranks_per_node) for p in paths]
    return fit_profile(logs, base)
