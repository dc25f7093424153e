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
from ._core.tune import read_nccl_log as _read_nccl_log

__all__ = ["Log", "LogFit", "ProfileFit", "fit", "fit_profile", "parse_nccl_log", "read_nccl_log"]


def read_nccl_log(path: Union[str, os.PathLike], *, collective: Optional[str] = None, ranks: Optional[int] = None,
                  ranks_per_node: Optional[int] = None) -> Log:
    """Reads and parses one nccl-tests log file (ValueError naming the file for what it cannot read)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"a log path must be a str or os.PathLike, not {type(path).__name__}")
    # the library's reader (the CLI's): ValueError naming the file when it is missing, not a
    # regular file, above 64 MiB or unreadable
    return _read_nccl_log(os.fsdecode(path), collective, ranks, ranks_per_node)


def fit(paths: Sequence[Union[str, os.PathLike]], *, base: Union[str, CostModel] = "default",
        collective: Optional[str] = None, ranks: Optional[int] = None,
        ranks_per_node: Optional[int] = None) -> ProfileFit:
    """Fits one curve per log (one log per collective and link class) onto `base`'s links:
    `.model` is the fitted CostModel, `.logs` the per-log reports (rows used, bands, errors,
    ignored rows)."""
    logs = [read_nccl_log(p, collective=collective, ranks=ranks, ranks_per_node=ranks_per_node) for p in paths]
    return fit_profile(logs, base)
