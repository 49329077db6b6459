"""The ProfilerReport as a person sees it: Debian's headless Chromium renders the page to a PNG and
the test checks the pixels where the plots and the rules table are: plots drawn in colour (not
blank boxes), the outlier steps in red, each rule row with the badge colour of its status, the
"no GPU" note shown where GPU plots would be.

SDLOCAL_UPDATE_SCREENSHOTS=1 also writes the top of the GPU job's page to
docs/images/profiler-report.png (the README's screenshot)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sdlocal.evaluator.reports import ProfilerReportInput, render_profiler_report
from sdlocal.evaluator.reports._plots import HIGHLIGHT
from sdlocal.trial.profiler import ProfilerReader
from tests.chromium import Box, RenderedPage, render_page
from tests.evaluator.reports._html import parse_page
from tests.evaluator.reports._jobs import WrittenJob
from tests.evaluator.reports.conftest import HOSTILE_RULE, rule_reports

SELECTORS = ["figure.plot svg", "table.rules tbody tr", "table.rules tbody tr .badge", "div.note",
             "div.cards .card", "table.kv"]
SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "profiler-report.png"


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


ISSUE_RED = _rgb("#cf222e")
OK_GREEN = _rgb("#1a7f37")
INFO_BG = _rgb("#ddf4ff")
CARD_BG = _rgb("#f6f8fa")


def _render(job: WrittenJob, tmp_path: Path, name: str, hostile: bool = True) -> tuple[RenderedPage, str]:
    reader = ProfilerReader(job.root)
    reader.refresh()
    reader.refresh()
    rules = {k: v for k, v in rule_reports(job).items() if hostile or k != HOSTILE_RULE}
    data = ProfilerReportInput.from_reader(reader, rules, job_name=name, clock=lambda: 1_760_003_600.0)
    html = render_profiler_report(data)
    page_file = tmp_path / f"profiler-report-{'with-hostile-rule' if hostile else 'clean'}.html"
    page_file.write_text(html, encoding="utf-8")
    return render_page(page_file, tmp_path, SELECTORS), html


def _plots_are_drawn(page: RenderedPage, titles: list[str]) -> dict[str, Box]:
    boxes = page.boxes["figure.plot svg"]
    assert len(boxes) == len(titles)
    by_title = {}
    for box, text, title in zip(boxes, page.texts["figure.plot svg"], titles, strict=True):
        assert title in text
        assert box.width > 900 and box.height > 150, (title, box)  # laid out full width, not collapsed
        assert box.y + box.height <= page.pixels.shape[0]
        ink, colour = page.ink(box), page.saturated_share(box)
        assert ink > 0.02, (title, ink)  # axes, labels and data, not a blank area
        assert colour > 0.004, (title, colour)  # the data itself, drawn in colour
        by_title[title] = box
    return by_title


def _rules_table_is_drawn(page: RenderedPage, expected: list[tuple[str, bool]]) -> None:
    rows = page.boxes["table.rules tbody tr"]
    badges = page.boxes["table.rules tbody tr .badge"]
    assert [t.split("\t")[0].strip() for t in page.texts["table.rules tbody tr"]] == [n for n, _ in expected]
    assert len(badges) == len(rows) == len(expected)
    for (name, fired), row, badge in zip(expected, rows, badges, strict=True):
        assert row.y <= badge.y and badge.y + badge.height <= row.y + row.height  # the badge is in its row
        assert page.ink(row) > 0.03, name  # text drawn in the row
        if name in ("OverallSystemUsage",):
            continue
        colour = ISSUE_RED if fired else OK_GREEN
        assert page.colour_share(badge, colour, tolerance=30) > 0.3, (name, fired)
    # rows top to bottom in the order of the document
    assert [r.y for r in rows] == sorted(r.y for r in rows)


def test_gpu_job_report_in_chromium(gpu_job: WrittenJob, tmp_path: Path) -> None:
    page, html = _render(gpu_job, tmp_path, "pytorch-two-gpus")
    titles = parse_page(html).figure_titles
    assert titles[:4] == ["CPU utilization", "CPU utilization per core", "GPU utilization", "GPU memory utilization"]
    plots = _plots_are_drawn(page, titles)
    # the outlier steps stand out in red in the step-duration plot, and only there in red
    steps = plots["Step durations over time"]
    assert page.colour_share(steps, _rgb(HIGHLIGHT), tolerance=30) > 0.0005
    assert page.colour_share(plots["GPU utilization"], _rgb(HIGHLIGHT), tolerance=30) < 0.0001
    # the heatmap is a filled area
    assert page.ink(plots["CPU utilization per core"]) > 0.4
    # time charts line up: one plot area under another, the same left edge and width
    assert len({(b.x, b.width) for b in plots.values()}) == 1
    _rules_table_is_drawn(page, [("CPUBottleneck", True), ("LowGPUUtilization", True), ("StepOutlier", True),
                                 (HOSTILE_RULE, True), ("Dataloader", True), ("MaxInitializationTime", False),
                                 ("OverallSystemUsage", False)])
    cards = page.boxes["div.cards .card"]
    assert len(cards) == 6
    for card in cards:  # a grey card with its figure written in it
        assert page.colour_share(card, CARD_BG, tolerance=3) > 0.5 and page.ink(card, background=CARD_BG) > 0.05
    assert not any("No GPU metrics" in t for t in page.texts["div.note"])
    if os.environ.get("SDLOCAL_UPDATE_SCREENSHOTS"):  # the README's picture: the same job, no hostile rule
        shown, html = _render(gpu_job, tmp_path, "pytorch-two-gpus", hostile=False)
        titles = parse_page(html).figure_titles
        _save_screenshot(shown, shown.boxes["figure.plot svg"][titles.index("GPU utilization")])


def test_cpu_job_report_in_chromium_says_there_is_no_gpu(cpu_job: WrittenJob, tmp_path: Path) -> None:
    page, html = _render(cpu_job, tmp_path, "pytorch-cpu-bound")
    titles = parse_page(html).figure_titles
    assert not any(t.startswith("GPU") for t in titles)
    plots = _plots_are_drawn(page, titles)
    notes = [(b, t) for b, t in zip(page.boxes["div.note"], page.texts["div.note"], strict=True)
             if t.startswith("No GPU metrics")]
    assert len(notes) == 1
    box = notes[0][0]
    assert page.colour_share(box, INFO_BG, tolerance=8) > 0.5  # the note's box is drawn
    assert page.ink(box, background=INFO_BG) > 0.03  # with its text in it
    # where the GPU plots would be: the note sits between the CPU plots and the memory plot
    assert plots["CPU utilization per core"].y < box.y < plots["Memory used"].y


def _save_screenshot(page: RenderedPage, until: Box) -> None:
    from PIL import Image

    bottom = min(page.pixels.shape[0], until.y + until.height + 40)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(page.pixels[:bottom])).save(SCREENSHOT, optimize=True)
