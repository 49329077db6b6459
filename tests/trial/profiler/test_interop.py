"""Interop: the real smdebug 1.0.34 readers (side virtualenv) read what our writers wrote."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sdlocal.trial.profiler import Sample, SystemMetricsWriter, TraceWriter
from sdlocal.trial.profiler.names import PYTHON_TIMELINE_SUFFIX

SMDEBUG_DUMP = r"""
import json, sys
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader

root = sys.argv[1]
system = LocalSystemMetricsReader(root)
samples = [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp]
           for e in system.get_events(0, 4102444800 * 10**6)]
framework = LocalAlgorithmMetricsReader(root)
events = [[e.event_name, e.start_time, e.end_time, e.event_phase, e.node_id, e.event_args]
          for e in framework.get_events(0, 4102444800 * 10**6)]
by_step = [[e.event_name, e.start_time] for e in framework.get_events_by_step(1, 3)]
json.dump({"samples": samples, "events": events, "by_step": by_step,
           "last_system_file_us": system.get_timestamp_of_latest_available_file()}, open(sys.argv[2], "w"))
"""

T0 = 1_700_003_040  # on a minute: its files start at T0, T0+60, T0+120


def _write_job(root: Path) -> tuple[list[list[object]], list[list[object]]]:
    samples: list[list[object]] = []
    sysw = SystemMetricsWriter(root)  # SageMaker's one file per minute
    for i in range(300):  # 150 s at 500 ms: three minute files
        ts = T0 + i * 0.5
        batch = [Sample("cpu", f"cpu{c}", "CPUUtilization", (i * 7 + c) % 100) for c in range(2)]
        batch += [Sample("cpu", "cpu0", "I/OWaitPercentage", 0.25), Sample("memory", "MemoryUsedPercent", "", 41.5),
                  Sample("gpu", "gpu0", "GPUUtilization", 99.99), Sample("network", "ReceiveBytesPerSecond", "Algorithm", 1234.0)]
        sysw.write(batch, ts)
        samples += [[s.type, s.name, s.dimension, float(s.value), "algo-1", ts] for s in batch]
    sysw.write_end_marker()
    assert len(sysw.closed_files) == 3

    events: list[list[object]] = []
    # smdebug's get_events_by_step only looks at pythontimeline files: write one of each kind.
    for suffix in ("model_timeline.json", PYTHON_TIMELINE_SUFFIX):
        tw = TraceWriter(root, "0-algo-1", suffix=suffix, start_time_us=T0 * 1_000_000, max_file_size=1500)
        for step in range(6):
            start = (T0 + step) * 1_000_000 + (0 if suffix == PYTHON_TIMELINE_SUFFIX else 500)
            tw.record_step("TRAIN", step, start, start + 400_000)
            events.append(["Step:ModeKeys.TRAIN", start, start + 400_000, "Step:ModeKeys.TRAIN", "0-algo-1", {"step_num": step}])
            tw.record("DataLoaderIter", "_MultiProcessingDataLoaderIter.__next__", start - 100, start,
                      {"num_workers": 2, "pin_memory": True})
            events.append(["_MultiProcessingDataLoaderIter.__next__", start - 100, start, "DataLoaderIter", "0-algo-1",
                           {"num_workers": 2, "pin_memory": True}])
        tw.close()
        assert len(tw.closed_files) > 1
    return samples, events


@pytest.mark.interop
def test_smdebug_reads_our_profiler_files(tmp_path: Path, smdebug_python: Path) -> None:
    root = tmp_path / "profiler-output"
    samples, events = _write_job(root)
    script = tmp_path / "dump.py"
    script.write_text(SMDEBUG_DUMP)
    out = tmp_path / "dump.json"
    res = subprocess.run([str(smdebug_python), str(script), str(root), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads(out.read_text())

    def key(row: list[object]) -> str:
        return json.dumps(row, sort_keys=True)

    # Whole values are written as integers ("Value":41 as SageMaker does); compare as numbers.
    theirs_samples = [row[:3] + [float(row[3])] + row[4:] for row in theirs["samples"]]
    assert sorted(map(key, theirs_samples)) == sorted(map(key, samples))
    # smdebug shows node "<rank>-algo-<n>" as "algo-<n>-<rank>" (its trace parser swaps them).
    for row in events:
        row[4] = "algo-1-0"
    assert sorted(map(key, theirs["events"])) == sorted(map(key, events))
    # Step ranges resolve through the pythontimeline files' step_num args.
    step_starts = {e[1] for e in theirs["by_step"] if e[0] == "Step:ModeKeys.TRAIN"}
    assert {(T0 + 1) * 1_000_000, (T0 + 2) * 1_000_000} <= step_starts
    assert theirs["last_system_file_us"] == (T0 + 120) * 1_000_000
