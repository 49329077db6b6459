"""Profiler rules' report files in their rule-output, as SageMaker lays them out:

    <rule-output>/profiler-output/profiler-reports/<Rule>.json    one per (sub-)rule
    <rule-output>/profiler-output/profiler-report.html             ProfilerReport's

`<rule-output>` is `s3://.../<job>/rule-output/<RuleConfigurationName>` (SDLOCAL_RULE_OUTPUT).
JSON reports are rewritten while the rule runs, when they changed and at most every
`min_interval_s` (a PUT each: ProfilerReport has eleven), and once more when the evaluation ends.
The HTML report (rules with an `html_report_job()` method: ProfilerReport) is drawn at most every
`html_interval_s` while the rule runs, on a thread of its own (drawing takes seconds; polls and
verdicts go on meanwhile, and a drawing still running is not started again), and once more at the
end; a drawing that fails is logged, the verdict and the JSON reports stand.
"""
from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sdlocal.trial.storage import Storage

REPORTS_PREFIX = "profiler-output/profiler-reports"
HTML_REPORT_KEY = "profiler-output/profiler-report.html"  # as SageMaker and evaluator.reports place it

log = logging.getLogger(__name__)
DRAW_TIMEOUT_S = 600.0  # the last live drawing, waited for before the final one


def report_key(name: str) -> str:
    return f"{REPORTS_PREFIX}/{name}.json"


def jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars and arrays as numbers and lists, NaN/inf as null, keys as
    strings, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_json(report: Mapping[str, Any]) -> bytes:
    return json.dumps(jsonable(report), indent=1).encode()


class ReportSink:
    def __init__(self, storage: Storage, *, min_interval_s: float = 5.0, html_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.storage = storage
        self.min_interval_s = min_interval_s
        self.html_interval_s = html_interval_s
        self.clock = clock
        self._last: float | None = None
        self._last_html: float | None = None
        self._written: dict[str, bytes] = {}
        self._drawing: threading.Thread | None = None

    def publish(self, rule: Any, *, final: bool = False) -> None:
        now = self.clock()
        if final or self._last is None or now - self._last >= self.min_interval_s:
            self._last = now
            for name, report in rule.report_files().items():
                data = report_json(report)
                if self._written.get(name) != data:
                    self.storage.write(report_key(name), data)
                    self._written[name] = data
        html_job = getattr(rule, "html_report_job", None)
        if html_job is None:
            return
        if final:
            if self._drawing is not None:
                self._drawing.join(timeout=DRAW_TIMEOUT_S)
            self._draw(html_job())
        elif (self._drawing is None or not self._drawing.is_alive()) and (
                self._last_html is None or now - self._last_html >= self.html_interval_s):
            draw = html_job()
            if draw is not None:
                self._last_html = now
                # Drawing takes seconds: on a thread, so that polls (and verdicts) go on meanwhile.
                self._drawing = threading.Thread(target=self._draw, args=(draw,), name="profiler-report-html",
                                                 daemon=True)
                self._drawing.start()

    def _draw(self, draw: Callable[[], str] | None) -> None:
        """Draw and write the HTML report; a failure is logged: the rule's verdict and its JSON
        reports stand without the page."""
        if draw is None:
            return
        try:
            self.storage.write(HTML_REPORT_KEY, draw().encode())
        except Exception as exc:  # noqa: BLE001 - the renderer's or the storage's: said once per draw
            log.error("profiler-report.html could not be written: %s: %s", type(exc).__name__, exc)
