"""The detection suite's one error type."""
from __future__ import annotations


class DetectionError(Exception):
    """A scenario could not be trained or a result could not be written."""
