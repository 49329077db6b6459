"""Benchmarks: our hook and reader against smdebug 1.0.34, measured side by side (`python benchmarks/run.py`)."""
