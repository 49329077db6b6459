"""HTML reports that rules write beside their verdicts: self-contained pages (inline SVG plots drawn
with matplotlib, inline CSS, no script, nothing loaded from the network).

- `_page`: the page, its sections, tables, notes, cards, with HTML escaping by default (`Html`).
- `_plots`: line charts, heatmaps, histograms and bar charts as inline SVG (docs/reports.md).
- `profiler`: ProfilerReport's `profiler-report.html`, from a `ProfilerReportInput`.

Other reports (the XGBoost training report) build a `Page` of `Section`s from the same parts.
"""
from __future__ import annotations

from sdlocal.evaluator.reports import _plots as plots
from sdlocal.evaluator.reports._page import (
    Html,
    Page,
    Section,
    badge,
    cards,
    escape,
    figure,
    join,
    key_values,
    note,
    paragraph,
    structured,
    table,
    tag,
)
from sdlocal.evaluator.reports.profiler import (
    PROFILER_REPORT_KEY,
    RULE_REPORTS_DIR,
    render_profiler_report,
    write_profiler_report,
)
from sdlocal.evaluator.reports.profiler_input import (
    JobSummary,
    PhaseTime,
    ProfilerReportInput,
    RuleReport,
    StepDurations,
    SystemData,
    TimeSeries,
    parse_rule_parameters,
)

__all__ = [
    "PROFILER_REPORT_KEY",
    "RULE_REPORTS_DIR",
    "Html",
    "JobSummary",
    "Page",
    "PhaseTime",
    "ProfilerReportInput",
    "RuleReport",
    "Section",
    "StepDurations",
    "SystemData",
    "TimeSeries",
    "badge",
    "cards",
    "escape",
    "figure",
    "join",
    "key_values",
    "note",
    "paragraph",
    "parse_rule_parameters",
    "plots",
    "render_profiler_report",
    "structured",
    "table",
    "tag",
    "write_profiler_report",
]
