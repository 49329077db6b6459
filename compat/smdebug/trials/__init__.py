"""smdebug.trials: open a trial (local folder or s3://bucket/prefix) with smdebug's Trial API.

`create_trial` waits for the training job's collections files, as smdebug's does, but with a
deadline (`collections_timeout=`, 600 s by default); the trial then refreshes by itself.
"""
from __future__ import annotations

from sdlocal.trial.kinds import LocalTrial, S3Trial
from sdlocal.trial.kinds import open_trial as create_trial
from sdlocal.trial.trial import Trial

__all__ = ["LocalTrial", "S3Trial", "Trial", "create_trial"]
