"""The notebook charts on bokeh 3, built with the calls of smdebug's profiling notebooks on a job
`sdlocal run` ran (read from the embedded S3 through AWS_ENDPOINT_URL_S3, as a notebook would):
data in their sources, saved as standalone pages with BokehJS inlined (no CDN: this machine has
no internet), and rendered in headless Chromium: the charts are drawn, not blank.

The screenshots stay in SDLOCAL_ANALYSIS_PNG (default: the test's tmp folder) to be looked at."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.chromium import screenshot
from tests.evaluator.analysis.conftest import ProfiledJob

pytestmark = pytest.mark.slow


@pytest.fixture
def png_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SDLOCAL_ANALYSIS_PNG", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def readers(profiled_job: ProfiledJob, s3_env: str) -> tuple[Any, Any]:
    from smdebug.profiler.algorithm_metrics_reader import S3AlgorithmMetricsReader
    from smdebug.profiler.system_metrics_reader import S3SystemMetricsReader

    system_metrics_reader = S3SystemMetricsReader(profiled_job.s3_uri)
    system_metrics_reader.refresh_event_file_list()
    framework_metrics_reader = S3AlgorithmMetricsReader(profiled_job.s3_uri)
    framework_metrics_reader.refresh_event_file_list()
    assert system_metrics_reader.get_timestamp_of_latest_available_file() > 0
    assert framework_metrics_reader.get_timestamp_of_latest_available_file() > 0
    return system_metrics_reader, framework_metrics_reader


def look(chart: Any, name: str, png_dir: Path, min_ink: float = 0.02) -> Any:
    """Save the chart as a page, check BokehJS is inline, screenshot it, check it is drawn."""
    page = chart.save(png_dir / f"{name}.html")
    text = page.read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in text and "<script type=\"text/javascript\" src=" not in text  # inline, no CDN
    png = screenshot(page.resolve(), png_dir.resolve() / f"{name}.png", 1300, 1100)
    with Image.open(png) as im:
        area = np.asarray(im.convert("RGB")).astype(np.int16)
    drawn = np.abs(area - 255).max(axis=2) > 24  # not the white background
    ys, xs = np.nonzero(drawn)
    assert ys.size, f"{name}: a blank page"
    box = drawn[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    chart = area[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    assert box.shape[0] > 150 and box.shape[1] > 200, (name, box.shape)  # a chart's size, not a stray line
    assert float(box.mean()) > min_ink, (name, float(box.mean()))  # axes, labels, data
    coloured = int(((chart.max(axis=2) - chart.min(axis=2)) >= 60).sum())
    assert coloured > 100, (name, coloured)  # the data drawn in colour (blue lines, navy bars, viridis)
    return png


def test_metrics_histogram_and_heatmap(readers: tuple[Any, Any], png_dir: Path) -> None:
    from smdebug.profiler.analysis.notebook_utils.heatmap import Heatmap
    from smdebug.profiler.analysis.notebook_utils.metrics_histogram import MetricsHistogram

    system_metrics_reader, framework_metrics_reader = readers
    system_metrics_reader.refresh_event_file_list()
    metrics_histogram = MetricsHistogram(system_metrics_reader)
    metrics_histogram.plot(starttime=0, endtime=system_metrics_reader.get_timestamp_of_latest_available_file(),
                           select_dimensions=["CPU", "GPU"], select_events=["total"])
    (dim,) = [d for d in metrics_histogram.sources if d.startswith("CPUUtilization")]
    counts = metrics_histogram.sources[dim]["total"].data["top"]
    assert counts.sum() >= 10  # a sample per 500 ms over the job
    look(metrics_histogram, "metrics_histogram", png_dir)
    # every series, as the dashboard notebook's plot() with no arguments
    all_series = MetricsHistogram(system_metrics_reader)
    all_series.plot()
    assert {"MemoryUsedPercent", "total"} <= {e for d in all_series.sources.values() for e in d}

    view_heatmap = Heatmap(system_metrics_reader, framework_metrics_reader, select_dimensions=["CPU", "GPU"],
                           plot_height=450)
    data = view_heatmap.source.data
    assert len(data["image"]) >= 3 and all(img.shape[1] == view_heatmap.width > 5 for img in data["image"])
    assert any(m.startswith("CPUUtilization_cpu0") for m in data["metric"])
    before = view_heatmap.width
    view_heatmap.update_data(system_metrics_reader.get_timestamp_of_latest_available_file() + 60_000_000)
    assert view_heatmap.width >= before
    look(view_heatmap, "heatmap", png_dir, min_ink=0.05)


def test_step_charts(readers: tuple[Any, Any], png_dir: Path) -> None:
    from smdebug.profiler.analysis.notebook_utils.step_histogram import StepHistogram
    from smdebug.profiler.analysis.notebook_utils.step_timeline_chart import StepTimelineChart

    _, framework_metrics_reader = readers
    step_histogram = StepHistogram(framework_metrics_reader)
    step_histogram.plot()
    assert {k.split("-nodeid:")[0] for k in step_histogram.sources} >= {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL",
                                                                        "Forward", "Backward(post-forward)"}
    key, train = next((k, s) for k, s in step_histogram.sources.items() if k.startswith("Step:ModeKeys.TRAIN"))
    # the 300 TRAIN steps, read from the reader itself, binned as smdebug's StepHistogram bins them:
    # the last (still open) step left out, up to median + 2 std (how many that drops depends on the
    # machine's load while the job ran: the count is derived, not fixed)
    events = framework_metrics_reader.get_events(0, framework_metrics_reader.get_timestamp_of_latest_available_file())
    durations = np.array([e.duration / 1e6 for e in events if e.event_phase == "Step:ModeKeys.TRAIN"])
    assert durations.size == 300 and key.startswith("Step:ModeKeys.TRAIN-nodeid:algo-1")
    shown = durations[:-1]
    within = shown[shown <= np.median(shown) + 2 * np.std(shown)]
    assert train.data["top"].sum() == within.size > 200
    look(step_histogram, "step_histogram", png_dir)

    view_step_timeline_chart = StepTimelineChart(framework_metrics_reader)
    data = view_step_timeline_chart.source.data
    assert len(data["x"]) == 330 and set(data["metric"]) == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"}
    assert np.all(np.diff(data["x"]) >= 0) and max(data["y"]) < 10  # seconds since the first step; durations in s
    look(view_step_timeline_chart, "step_timeline_chart", png_dir)


def test_timeline_charts_and_drill_down(readers: tuple[Any, Any], png_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts

    system_metrics_reader, framework_metrics_reader = readers
    view_timeline_charts = TimelineCharts(system_metrics_reader, framework_metrics_reader,
                                          select_dimensions=["CPU", "GPU"], select_events=["total"])
    assert view_timeline_charts.figures
    source = next(iter(next(iter(view_timeline_charts.sources.values())).values()))
    assert len(source.data["x"]) >= 10 and 0 <= source.data["x"][0] <= 1.0  # s since the first sample
    look(view_timeline_charts, "timeline_charts", png_dir)
    n = len(source.data["x"])
    spent = view_timeline_charts.find_time_annotations([0, n - 1])
    assert any(k.startswith("Step:ModeKeys.TRAIN_") for k in spent) and "Spent" in capsys.readouterr().out
    layout = view_timeline_charts.plot_detailed_profiler_data([0, n - 1])
    assert layout is not None
    phases = view_timeline_charts.detail_sources["phases"]
    assert {"Step:ModeKeys.TRAIN", "Forward", "Backward(post-forward)"} <= set(phases)
    from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts as Same

    assert Same is TimelineCharts
    from sdlocal.evaluator.analysis.charts._base import Chart

    detail = Chart()
    detail.layout = layout
    look(detail, "timeline_drill_down", png_dir)
    # without a framework reader, as the profiling notebooks build it
    system_only = TimelineCharts(system_metrics_reader, framework_metrics_reader=None,
                                 select_dimensions=["CPU", "GPU"], select_events=["total"])
    assert system_only.figures and json.dumps(list(system_only.sources))
