"""smdebug.trials: open a trial (local folder or s3://bucket/prefix) with smdebug's Trial API."""
from __future__ import annotations

from trial import Trial, create_trial

__all__ = ["Trial", "create_trial"]
