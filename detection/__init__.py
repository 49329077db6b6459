"""Detection quality: every built-in rule must fire on its fault and stay silent on healthy training.

`python -m detection` trains small CPU models through our hook (scenarios.py), evaluates every
built-in rule on every run through `sdlocal.evaluator.api.evaluate_trial` (matrix.py) and writes the
rules × runs matrix to docs/detection-matrix.md plus a JSON of the results (report.py).
"""
from detection.errors import DetectionError

__all__ = ["DetectionError"]
