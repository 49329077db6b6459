"""ProfilerReport's `profiler-report.html`: the job's summary figures, the profiler rules sorted by
times triggered with what each found and what to do about it, system utilization and step
durations over time.

    data = ProfilerReportInput.from_reader(reader, {"StepOutlier": report_dict, ...}, job_name=job)
    html = render_profiler_report(data)
    key = write_profiler_report(rule_output_storage, data)   # profiler-output/profiler-report.html
"""
from __future__ import annotations

import time
from collections.abc import Sequence

from sdlocal.evaluator.reports import _profiler_figures as figs
from sdlocal.evaluator.reports._page import (
    Html,
    Page,
    Section,
    badge,
    cards,
    fmt_number,
    join,
    key_values,
    note,
    paragraph,
    structured,
    table,
    tag,
)
from sdlocal.evaluator.reports._profiler_text import fill, rule_text
from sdlocal.evaluator.reports.profiler_input import JobSummary, PhaseTime, ProfilerReportInput, RuleReport
from sdlocal.trial.storage import Storage

# Where ProfilerReport's outputs go under its rule-output folder, as SageMaker lays them out.
PROFILER_REPORT_KEY = "profiler-output/profiler-report.html"
RULE_REPORTS_DIR = "profiler-output/profiler-reports"


def sorted_rules(rules: Sequence[RuleReport]) -> list[RuleReport]:
    """Most triggered first, then most violations, then by name; rules that could not be evaluated
    after those that were."""
    return sorted(rules, key=lambda r: (r.error is not None, -r.triggered, -r.violations, r.name))


def rule_status(rule: RuleReport) -> tuple[str, str]:
    """(badge text, kind) of a rule's row."""
    if rule.error is not None:
        return "not evaluated", "error"
    if rule_text(rule.name).summary_only:
        return "summary", "info"
    return ("issues found", "issue") if rule.triggered else ("no issue", "ok")


def finding(rule: RuleReport) -> str:
    """The rule's one-line finding: its own, else derived from its counts and parameters."""
    if rule.finding:
        return rule.finding
    if rule.error is not None:
        return f"Not evaluated: {rule.error}"
    text = rule_text(rule.name)
    if text.summary_only:
        return "Reports figures only: see the statistics in this report."
    if rule.triggered:
        return fill(text.fired, rule.parameters, text.defaults, triggered=rule.triggered,
                    violations=rule.violations, datapoints=rule.datapoints)
    if rule.datapoints == 0:
        return "No issue found; it had no data to judge."
    return f"No issue found in {rule.datapoints:,} datapoint{'s' if rule.datapoints != 1 else ''}."


def _parameters(rule: RuleReport) -> Html:
    if not rule.parameters:
        return Html('<span class="muted">defaults</span>')
    return join((tag("code", f"{k}={v}") for k, v in sorted(rule.parameters.items())), " ")


def rules_table(rules: Sequence[RuleReport]) -> Html:
    ordered = sorted_rules(rules)
    rows = []
    for r in ordered:
        text, kind = rule_status(r)
        rows.append([tag("a", r.name, href=f"#rule-{_anchor(r.name)}"), badge(text, kind), r.triggered,
                     r.violations, r.datapoints, _parameters(r), finding(r)])
    return table(["Rule", "Status", "Times triggered", "Violations", "Datapoints", "Parameters", "Finding"],
                 rows, numeric=(2, 3, 4), class_="rules",
                 row_classes=[rule_status(r)[1] for r in ordered])


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def rule_details(rules: Sequence[RuleReport]) -> Html:
    blocks = []
    for r in sorted_rules(rules):
        text = rule_text(r.name)
        label, kind = rule_status(r)
        body: list[object] = [
            tag("h3", r.name, " ", badge(label, kind)),
            paragraph(tag("strong", "What it checks: "), fill(text.checks, r.parameters, text.defaults),
                      class_="what"),
            paragraph(tag("strong", "What it found: "), finding(r), class_="what"),
        ]
        if r.details:
            body.append(structured(r.details))
        advice_label = "What to do: " if r.triggered and not text.summary_only else "If it fires: "
        if text.summary_only:
            advice_label = "How to read it: "
        body.append(paragraph(tag("strong", advice_label), text.advice,
                              class_="todo" if r.triggered and not text.summary_only else "what"))
        blocks.append(tag("div", *body, class_="rule", id=f"rule-{_anchor(r.name)}"))
    return join(blocks)


def _utc(us: int | None) -> str | None:
    if us is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(us / 1e6))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "–"
    return f"{100 * part / whole:.1f} %"


def summary_table(s: JobSummary) -> Html:
    d = s.duration_s
    rows: list[tuple[str, object]] = [
        ("Job start", _utc(s.start_us)),
        ("Job end" if s.ended else "Last data seen (job still running)", _utc(s.end_us)),
        ("Job duration", f"{_duration(d)} ({fmt_number(d)} s)" if d is not None else None),
        ("Training loop start (first step)", _utc(s.loop_start_us)),
        ("Training loop end (last step)", _utc(s.loop_end_us)),
        ("Training loop duration", f"{_duration(s.loop_s)} ({_share(s.loop_s, d)} of the job)"
         if s.loop_s is not None else None),
        ("Initialization (start to first step)", f"{_duration(s.initialization_s)} "
         f"({_share(s.initialization_s, d)})" if s.initialization_s is not None else None),
        ("Finalization (last step to end)", f"{_duration(s.finalization_s)} ({_share(s.finalization_s, d)})"
         if s.finalization_s is not None else None),
        ("Steps", ", ".join(f"{m} {n:,}" for m, n in s.steps.items()) or None),
        ("Nodes", ", ".join(s.nodes) or None),
        ("CPU cores", s.cpu_cores or None),
        ("GPUs", s.gpus),
    ]
    return key_values(rows)


def header(data: ProfilerReportInput) -> Html:
    s = data.summary
    judged = [r for r in data.rules if r.error is None and not rule_text(r.name).summary_only]
    fired = [r for r in judged if r.triggered]
    parts: list[object] = []
    if not data.rules:
        parts.append(note("No profiler rule report was given: this report shows the recorded data only.", "info"))
    elif fired:
        names = ", ".join(r.name for r in sorted_rules(fired))
        parts.append(note(f"{len(fired)} of {len(judged)} rules found issues: {names}.", "warn"))
    else:
        parts.append(note(f"None of the {len(judged)} rules found an issue.", "ok"))
    if not s.ended:
        parts.append(note("The training job was still running when this report was written: it covers the "
                          "data recorded so far.", "info"))
    train_steps = s.steps.get("TRAIN", sum(s.steps.values()))
    parts.append(cards([
        ("job duration", _duration(s.duration_s)),
        ("training loop", _duration(s.loop_s)),
        ("initialization", _duration(s.initialization_s)),
        ("training steps", f"{train_steps:,}"),
        ("rules triggered", f"{len(fired)} / {len(judged)}" if judged else "–"),
        ("CPU cores · GPUs", f"{s.cpu_cores} · {s.gpus}"),
    ]))
    return join(parts)


def phases_table(phases: Sequence[PhaseTime], loop_s: float | None) -> Html:
    if not phases:
        return note("No framework trace events were recorded.", "info")
    rows = [[p.phase, p.count, p.total_us / 1e6, p.total_us / 1e3 / max(p.count, 1), _share(p.total_us / 1e6, loop_s)]
            for p in phases]
    return table(["Phase", "Events", "Total (s)", "Mean (ms)", "Share of the training loop"], rows,
                 numeric=(1, 2, 3, 4), class_="stats")


def _outlier_stddev(rules: Sequence[RuleReport]) -> float:
    for r in rules:
        if r.name == "StepOutlier":
            try:
                return float(r.parameters.get("stddev", figs.DEFAULT_OUTLIER_STDDEV))
            except ValueError:
                break
    return figs.DEFAULT_OUTLIER_STDDEV


def build_page(data: ProfilerReportInput) -> Page:
    s = data.summary
    start = s.start_us if s.start_us is not None else 0
    axis = figs.TimeAxis.for_span(start, s.end_us if s.end_us is not None else start)
    stddev = _outlier_stddev(data.rules)
    system_body = (note("No system metrics were recorded: the job ran without a ProfilerConfig, or profiling "
                        "was disabled.", "info") if data.system.empty else
                   join([figs.cpu_figures(data.system, axis), figs.gpu_figures(data.system, axis),
                         figs.other_system_figures(data.system, axis), figs.system_stats_table(data.system)]))
    sections = [
        Section("Training job summary", summary_table(s), id="summary",
                lead="When the job started and ended, and how its time splits between start-up, the training "
                     "loop and finalization."),
        Section("Rules summary", rules_table(data.rules) if data.rules else
                note("No profiler rule report was given.", "info"), id="rules",
                lead="The profiler rules, most triggered first. Each rule's findings and what to do about them "
                     "are under Rule details."),
        Section("System utilization", system_body, id="system",
                lead="What the system monitor sampled while the job ran, over time since the job started."),
        Section("Step durations", join([figs.step_figures(data.steps, axis, stddev),
                                        figs.step_stats_table(data.steps, stddev)]), id="steps",
                lead="How long each training step took, from the framework trace."),
        Section("Framework time", phases_table(data.phases, s.loop_s), id="framework",
                lead="Time inside the recorded framework events, by phase (events can nest: shares do not add "
                     "up to 100 %)."),
        Section("Rule details", rule_details(data.rules) if data.rules else
                note("No profiler rule report was given.", "info"), id="details"),
    ]
    generated = _utc(data.generated_us) if data.generated_us else None
    footer = ("Written by sdlocal's ProfilerReport"
              + (f" at {generated}" if generated else "")
              + " from the job's profiler-output. Plots are static SVG (matplotlib); the page loads nothing "
                "from the network."
              + (f" {data.damaged_lines} damaged profiler data line(s) were skipped." if data.damaged_lines else ""))
    return Page(title=f"Profiler report: {s.job_name}", subtitle="SageMaker Debugger ProfilerReport, run "
                "locally by sdlocal", header=header(data), sections=sections, footer=footer,
                meta={"generator": "sdlocal ProfilerReport"})


def render_profiler_report(data: ProfilerReportInput) -> str:
    """The report as one self-contained HTML document."""
    return build_page(data).render()


def write_profiler_report(storage: Storage, data: ProfilerReportInput, key: str = PROFILER_REPORT_KEY) -> str:
    """Render and write the report (atomically) under `storage`; returns the key written."""
    storage.write(key, render_profiler_report(data).encode("utf-8"))
    return key


__all__ = ["PROFILER_REPORT_KEY", "RULE_REPORTS_DIR", "build_page", "finding",
           "render_profiler_report", "rules_table", "sorted_rules", "write_profiler_report"]
