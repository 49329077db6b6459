"""CreateXgboostReport (XGBoost): writes the training report; never fires."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.trial.storage import Storage

# Redrawing the report costs about a second: while training runs, at most this often.
DEFAULT_REFRESH_S = 60.0


class CreateXgboostReport(Rule):
    """Writes `xgboost_report.html` (evaluator/reports/xgboost.py) into the rule's output
    (rule-output/<RuleConfigurationName>/, as SageMaker's) when training ends, and every
    `refresh_seconds` while it runs; it judges nothing (every step is "not evaluated"), so its
    status is NoIssuesFound.

    The report needs the XGBoost hook's collections: metrics, feature_importance, predictions,
    labels, hyperparameters (the rule's default collections), average_shap (with the hook's
    train_data). `report_output` is set by the evaluator (the rule-output storage); without it
    (`sdlocal evaluate`) nothing is written.
    """

    group = "XGBoost"
    default_collections = (
        DefaultCollection.of("metrics", {"save_interval": "5"}),
        DefaultCollection.of("feature_importance", {"save_interval": "5"}),
        DefaultCollection.of("hyperparameters", {"save_steps": "0"}),
        DefaultCollection.of("predictions", {"save_interval": "5"}),
        DefaultCollection.of("labels", {"save_interval": "5"}),
        DefaultCollection.of("average_shap"),  # sdlocal's: the report's SHAP section
        DefaultCollection.of("losses"),  # sdlocal's: the loss curves
    )

    def __init__(self, base_trial: Any, refresh_seconds: object = DEFAULT_REFRESH_S, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.refresh_seconds = float(parse_float(self.rule_name, "refresh_seconds", refresh_seconds, minimum=0.0))  # type: ignore[arg-type]
        self.report_output: Storage | None = None
        self.job_name = ""
        self.written: str | None = None  # the key of the last report written
        self._clock: Callable[[], float] = time.monotonic
        self._last_write: float | None = None

    def invoke_at_step(self, step: int) -> Verdict:
        now = self._clock()
        if self._last_write is None or now - self._last_write >= self.refresh_seconds:
            self.write_report()
        return Verdict.NOT_EVALUATED

    def invoke_at_end(self) -> Verdict:
        self.write_report()
        return Verdict.NOT_EVALUATED

    def write_report(self) -> str | None:
        self._last_write = self._clock()
        if self.report_output is None:
            self.logger.info("%s: no rule output to write the report to", self.rule_name)
            return None
        from sdlocal.evaluator.reports.xgboost import XgboostReportInput, write_xgboost_report

        data = XgboostReportInput.from_trial(self.base_trial, job_name=self.job_name)
        self.written = write_xgboost_report(self.report_output, data)
        self.logger.info("%s: wrote %s", self.rule_name, self.written)
        return self.written
