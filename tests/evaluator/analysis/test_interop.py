"""sdlocal's analysis API against the REAL smdebug 1.0.34 (its side virtualenv) on the same job
folder, a job that `sdlocal run` ran: the same readers' answers, the same frames (smdebug's
columns, the same rows and values), the same statistics; and where sdlocal fixed smdebug's
figures (README, "Profiler analysis in notebooks"), exactly the documented difference."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.evaluator.analysis.conftest import ProfiledJob

pytestmark = [pytest.mark.interop, pytest.mark.slow]
SCRIPT = Path(__file__).parent / "scripts" / "smdebug_reference.py"


@pytest.fixture
def reference(profiled_job: ProfiledJob, smdebug_python: Path) -> dict[str, Any]:
    proc = subprocess.run([str(smdebug_python), str(SCRIPT), str(profiled_job.local)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REFERENCE ", 1)[1])


def _close(ours: list[Any], theirs: list[Any], what: str, us_tolerance: int = 1) -> None:
    """Rows equal, numbers within `us_tolerance` (smdebug truncated float seconds to µs; sdlocal rounds)."""
    assert len(ours) == len(theirs), what
    for a_row, b_row in zip(ours, theirs, strict=True):
        for a, b in zip(a_row, b_row, strict=True):
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
                assert abs(a - b) <= max(us_tolerance, 1e-9 * abs(b)), (what, a_row, b_row)
            elif a != b:
                assert isinstance(a, str) and _same_time(a, b), (what, a_row, b_row)


def _same_time(a: str, b: str) -> bool:
    """Two "%Y-%m-%dT%H:%M:%S:%f" times at most 1 µs apart."""
    from sdlocal.evaluator.analysis.events import parse_human_time

    try:
        return abs(parse_human_time(a) - parse_human_time(b)) <= 1
    except ValueError:
        return False


def test_readers_answer_as_smdebugs(profiled_job: ProfiledJob, reference: dict[str, Any]) -> None:
    from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    system_reader = LocalSystemMetricsReader(str(profiled_job.local))
    ref = reference["system_reader"]
    assert system_reader.get_timestamp_of_first_available_file() == ref["first"]
    last = system_reader.get_timestamp_of_latest_available_file()
    assert last == ref["latest"]
    events = system_reader.get_events(0, last)
    assert len(events) == ref["events"] > 50
    assert len(system_reader.get_events(0, last, event_type="cpu")) == ref["cpu_events"]
    ours = sorted([e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in events)
    for a, b in zip(ours, ref["sample"], strict=True):
        assert a[:5] == b[:5] and abs(a[5] - b[5]) < 1e-6

    framework_reader = LocalAlgorithmMetricsReader(str(profiled_job.local))
    ref = reference["framework_reader"]
    fw_last = framework_reader.get_timestamp_of_latest_available_file()
    assert fw_last == ref["latest"]
    fw_events = framework_reader.get_events(0, fw_last)
    assert len(fw_events) == ref["events"] > 600  # 300 TRAIN and 30 EVAL steps, each with its phases
    assert list(framework_reader._get_time_interval_for_step(1, 10)) == ref["step_interval"]
    ours_fw = sorted([e.event_name, e.event_phase, e.start_time, e.end_time, e.duration, e.node_id, e.pid, e.phase,
                      e.file_type, e.event_args] for e in fw_events)
    assert ours_fw == ref["sample"]
    assert fw_events[0].node_id.startswith("algo-1-")  # "<pid>-algo-1" read as smdebug reads it


def test_frames_have_smdebugs_columns_rows_and_values(profiled_job: ProfiledJob, reference: dict[str, Any]) -> None:
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    pf = PandasFrame(str(profiled_job.local))
    assert pf.start_time == reference["start_time"]
    system_df = pf.get_all_system_metrics()
    framework_df = pf.get_all_framework_metrics()
    assert list(system_df.columns) == reference["system_df"]["columns"]
    assert list(framework_df.columns) == reference["framework_df"]["columns"]
    # rows of one instant may come in another order: compare sorted by time, series and dimension
    def key(row: list[Any]) -> tuple[Any, ...]:
        return row[1], row[3], row[4]

    _close(sorted(system_df.values.tolist(), key=key), sorted(reference["system_df"]["rows"], key=key), "system")
    # framework rows: the same but for `tid` (smdebug: Python's per-process hash; here a stable one)
    tid = reference["framework_df"]["columns"].index("tid")

    def fw_key(row: list[Any]) -> tuple[Any, ...]:
        return row[2], row[3], row[6], row[9]

    ours = sorted(framework_df.values.tolist(), key=fw_key)
    theirs = sorted(reference["framework_df"]["rows"], key=fw_key)
    _close([r[:tid] + r[tid + 1:] for r in ours], [r[:tid] + r[tid + 1:] for r in theirs], "framework")
    # ... and the same threads: rows share a tid here exactly when they share one there
    groups = [{(r[9], r[10]): r[tid] for r in rows} for rows in (ours, theirs)]
    assert len(set(groups[0].values())) == len(set(groups[1].values()))
    assert len(pf.get_all_framework_metrics(selected_framework_metrics=["Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL"])) \
        == reference["steps_df_rows"] == 300


def test_statistics_match_smdebugs_and_differ_only_where_documented(profiled_job: ProfiledJob,
                                                                   reference: dict[str, Any]) -> None:
    from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    pf = PandasFrame(str(profiled_job.local))
    system_df, framework_df = pf.get_all_system_metrics(), pf.get_all_framework_metrics()
    columns_before = list(framework_df.columns)
    analysis = PandasFrameAnalysis(system_df, framework_df)
    assert list(framework_df.columns) == columns_before  # the user's frame is not changed (smdebug added columns)

    stats = analysis.get_job_statistics()
    ref = reference["job_statistics"]
    for k in ("start_time", "end_time", "training_loop_start", "training_loop_end"):
        assert _same_time(stats[k], ref[k]), k
    for k in ("job_duration", "training_loop_duration", "finalization"):
        assert abs(stats[k] - ref[k]) <= 2, k
    # documented fix: initialization from the first sample, not from the first file's period start
    first_sample_us = int(system_df["timestamp_us"].min())
    assert abs(stats["initialization"] - (ref["initialization"] - first_sample_us)) <= 2
    assert stats["initialization_%"] + stats["training_loop_%"] + stats["finalization_%"] == pytest.approx(100)
    assert "start_time" in repr(stats)  # shown as smdebug's one-column table

    step_stats = analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)
    assert list(step_stats.columns) == reference["step_statistics"]["columns"]
    _close(step_stats.values.tolist(), reference["step_statistics"]["rows"], "step statistics")
    assert set(step_stats["training_phase"]) == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"}

    util = analysis.get_utilization_stats()
    assert list(util.columns) == reference["utilization"]["columns"]
    same = [r for r in util.values.tolist() if r[0] in ("memory", "i/o", "network")]
    _close(same, [r for r in reference["utilization"]["rows"] if r[0] in ("memory", "i/o", "network")], "util")
    # documented fix: CPU figures of CPUUtilization alone = smdebug's on a frame without I/O wait
    _close(util.values.tolist(), reference["utilization_only"]["rows"], "utilization of the utilization series")
    by_phase = analysis.get_utilization_stats(by=StatsBy.TRAINING_PHASE)
    assert list(by_phase.columns) == reference["utilization_by_phase_only"]["columns"]
    _close(by_phase.values.tolist(), reference["utilization_by_phase_only"]["rows"], "utilization by phase")
    _close(analysis.get_training_phase_intervals().values.tolist(), reference["phase_intervals"], "intervals")
    usage = analysis.get_device_usage_stats()
    assert [str(c) for c in usage.columns] == reference["device_usage_only"]["columns"]
    assert usage.values.tolist() == reference["device_usage_only"]["rows"]

    train = framework_df[framework_df["framework_metric"] == "Step:ModeKeys.TRAIN"]
    ours = pf.get_framework_metrics_by_begin_and_end_timesteps(train["start_time"], train["end_time"])
    for mine, theirs in zip(ours, reference["by_begin_end"], strict=True):
        assert mine.keys() == theirs.keys() and np.allclose([mine[k] for k in theirs], list(theirs.values()))
