"""The one error of the benchmark harness."""

from __future__ import annotations


class BenchmarkError(Exception):
    """A run failed, timed out, or did not produce the data it was supposed to (never benchmark a no-op)."""
