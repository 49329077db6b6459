"""The launcher's side of the StopTraining action: watch the rules' outputs for the stop request an
evaluator writes when its rule fires (`<rule-output>/actions/stop-training.json`,
evaluator/actions.py) and say when the running job must stop.

A request stops the job only if the job's name starts with its `training_job_prefix` (SageMaker:
"the prefix of the training job to stop"); one that does not match is reported once and ignored.
The rules' outputs (trial Storages) and the clock are injected; `poll()` reads nothing more often
than every `interval` seconds.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sdlocal.evaluator.actions import STOP_TRAINING_KEY, StopTrainingRequest
from sdlocal.trial.storage import Storage


class StopTrainingWatcher:
    def __init__(
        self,
        job_name: str,
        rule_outputs: Mapping[str, Storage],  # RuleConfigurationName -> its rule-output storage
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_ignored: Callable[[StopTrainingRequest], None] | None = None,
    ) -> None:
        self.job_name = job_name
        self._pending = dict(rule_outputs)
        self.interval = interval
        self.clock = clock
        self.on_ignored = on_ignored
        self._last: float | None = None

    def poll(self) -> StopTrainingRequest | None:
        """A stop request for this job, if one arrived since the last look (at most once per interval)."""
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return None
        self._last = now
        for name, output in list(self._pending.items()):
            request = self._read(output)
            if request is None:
                continue
            del self._pending[name]  # each rule requests at most once
            if request.matches(self.job_name):
                return request
            if self.on_ignored is not None:
                self.on_ignored(request)
        return None

    def _read(self, rule_output: Storage) -> StopTrainingRequest | None:
        try:
            body = rule_output.read(STOP_TRAINING_KEY)
        except FileNotFoundError:
            return None
        try:
            return StopTrainingRequest.from_json(body)
        except ValueError:
            return None  # torn or foreign: look again next time
