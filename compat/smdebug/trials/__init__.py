"""smdebug.trials: open a trial (local folder or s3://bucket/prefix) with smdebug's Trial API.

`create_trial` waits for the training job's collections files, as smdebug's does, but with a
deadline (`collections_timeout=`, 600 s by default); the trial then refreshes by itself.
`create_trial(path, profiler=True)` opens a job's profiler output instead
(evaluator/analysis/profiler_trial.py).
"""
from __future__ import annotations

import os
from typing import Any

from sdlocal.trial.kinds import LocalTrial, S3Trial, open_trial
from sdlocal.trial.trial import Trial


def create_trial(path: str, name: str | None = None, profiler: bool = False, output_dir: str | None = None,
                 **kwargs: Any) -> Any:
    """smdebug's create_trial: a LocalTrial / S3Trial, or with profiler=True a ProfilerTrial of the
    profiler output at `path` (its `output_dir` is made only when given)."""
    if profiler:
        from sdlocal.evaluator.analysis.profiler_trial import ProfilerTrial

        path = str(path).strip()
        return ProfilerTrial(name or os.path.basename(path.rstrip("/")) or path, path, output_dir, **kwargs)
    return open_trial(path, name, **kwargs)


__all__ = ["LocalTrial", "S3Trial", "Trial", "create_trial"]
