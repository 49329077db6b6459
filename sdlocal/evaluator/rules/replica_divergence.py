"""ReplicaDivergence: data-parallel workers whose weights differ at the same step."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rules._records import Line, RecordRule, steps_of


class ReplicaDivergence(RecordRule):
    """Fires when two workers of a data-parallel job hold different weights at the same step: a
    parameter's norm (the hook's per-worker records) differs by more than `tolerance` (relative).

    Replicas kept in step by gradient synchronisation (DDP, Horovod) hold identical weights; a lost
    synchronisation (a wrapper bypassed, a dtype round trip, a rank-local update) makes them drift
    apart silently. Needs the records of at least two workers: every worker writes them whatever
    `include_workers` (hook/records.py). Not evaluated for a single-worker job.
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, tolerance: object = 1e-6, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.tolerance = float(parse_float(self.rule_name, "tolerance", tolerance, minimum=0.0))  # type: ignore[arg-type]
        self._by_step: dict[int, dict[str, dict[str, Any]]] = {}

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        for worker, line in steps_of(lines):
            if line.get("param_norms") is not None:
                self._by_step.setdefault(int(line["step"]), {})[worker] = line
        verdict: bool | None = None
        for step in sorted(self._by_step):
            workers = self._by_step[step]
            if len(workers) < 2:
                continue
            del self._by_step[step]
            names = sorted(workers)
            ref_worker = names[0]
            ref = workers[ref_worker]["param_norms"]
            params = self.layouts.get(ref_worker, {}).get("params", [])
            for other in names[1:]:
                norms = workers[other]["param_norms"]
                if len(norms) != len(ref):
                    self.reason = f"{ref_worker} and {other} hold different parameters at step {step}"
                    return True
                for i, (a, b) in enumerate(zip(ref, norms, strict=False)):
                    if abs(a - b) > self.tolerance * max(abs(a), abs(b), 1e-12):
                        name = params[i] if i < len(params) else f"parameter {i}"
                        self.reason = (f"{ref_worker} and {other} diverge at step {step}: {name} has norm "
                                       f"{a:.6g} vs {b:.6g}")
                        return True
            verdict = False
        return verdict
