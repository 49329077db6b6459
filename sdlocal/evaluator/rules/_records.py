"""What the rules beyond Debugger share: they judge the hook's training records
(sdlocal.trial.records, written by hook/records.py) rather than tensors.

A records rule reads the records that appeared since its last call at each step the loop hands it
and judges the lines of steps up to that one; at the end (`invoke_at_end`) it judges the rest and
what needs the whole training. `judge_records(lines, final)` answers True (fires: `self.reason` says why),
False (judged, healthy) or None (nothing to judge yet).
"""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.trial.records import RECORDS_COLLECTION, RecordReader

# Records every 5 steps by default (a job's save_interval in HookParameters replaces it, as for
# every rule's default collection): per-step signals (modes, batch fingerprints, optimizer steps)
# are counted on every step whatever the interval.
RECORDS_DEFAULT = DefaultCollection.of(RECORDS_COLLECTION, {"save_interval": "5"})

Line = tuple[str, dict[str, Any]]


class RecordRule(Rule):
    default_collections = (RECORDS_DEFAULT,)

    def __init__(self, base_trial: Any, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self._reader = RecordReader(base_trial.storage)
        self._queue: list[Line] = []
        self.reason: str | None = None
        self._said = False
        self.layouts: dict[str, dict[str, Any]] = {}  # worker -> its latest layout line

    def _take(self, upto: int | None) -> list[Line]:
        self._queue += self._reader.poll()
        ready = [wl for wl in self._queue if upto is None or int(wl[1].get("step", 0)) <= upto]
        self._queue = [wl for wl in self._queue if not (upto is None or int(wl[1].get("step", 0)) <= upto)]
        for worker, line in ready:
            if line.get("kind") == "layout":
                self.layouts[worker] = line
        return ready

    def _verdict(self, fired: bool | None) -> Verdict:
        if fired is None:
            return Verdict.NOT_EVALUATED
        if fired:
            if not self._said:
                self._said = True
                self.logger.warning("%s: %s", self.rule_name, self.reason)
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET

    def invoke_at_step(self, step: int) -> Verdict:
        return self._verdict(self.judge_records(self._take(step), final=False))

    def invoke_at_end(self) -> Verdict:
        lines = self._take(None)
        if not self._reader.seen_any:
            self.logger.warning("%s: the trial has no training records (records/): nothing was judged; they "
                                "come from sdlocal's hook with the %s collection", self.rule_name, RECORDS_COLLECTION)
        return self._verdict(self.judge_records(lines, final=True))

    def missing_data(self) -> str | None:
        """Why the rule judged nothing, for evaluator/unjudged.py: a trial without records (the real
        smdebug hook, or a job without the records collection) gets no NoIssuesFound."""
        if self._reader.seen_any:
            return None
        return (f"the trial has no training records (records/): they come from sdlocal's hook with the "
                f"{RECORDS_COLLECTION} collection")

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:  # pragma: no cover - abstract
        raise NotImplementedError


def steps_of(lines: list[Line], kind: str = "step") -> list[Line]:
    return [(w, line) for w, line in lines if line.get("kind") == kind]
