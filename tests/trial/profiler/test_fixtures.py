"""Every file of smdebug's profiler samples (../shared/fixtures/smdebug-profiler/), and damage."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial.profiler import (
    ProfilerDataError,
    ProfilerReader,
    SeriesKey,
    parse_system_file,
    parse_trace_file,
)
from sdlocal.trial.profiler.names import parse_trace_key


def _json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_fixture_file_is_read(profiler_fixtures: Path) -> None:
    files = sorted(p for p in profiler_fixtures.rglob("*") if p.is_file() and p.name != "README.md")
    assert len(files) == 7
    for path in files:
        key = path.relative_to(profiler_fixtures).as_posix()
        data = path.read_bytes()
        if ".algo-1.json" in path.name:
            parsed = parse_system_file(data, key)
            assert parsed.damage == []
            if path.name.endswith(".corrupt"):
                # 13 intact lines, then `..."NodeId":"algo-1"` cut before its Timestamp and brace.
                intact = _json_lines(profiler_fixtures / "test_traces/system/incremental/1591160699.algo-1.json")[:13]
                assert parsed.partial_last_line and len(parsed.records) == 13
            else:
                intact = _json_lines(path)
                assert not parsed.partial_last_line and len(parsed.records) == len(intact)
            for rec, obj in zip(parsed.records, intact, strict=True):
                assert (rec.node, rec.type, rec.name, rec.dimension) == (obj["NodeId"], obj["Type"], obj["Name"], obj["Dimension"])
                assert rec.value == obj["Value"] and rec.timestamp_us == round(obj["Timestamp"] * 1e6)
        else:
            key = key[key.index("framework/"):]  # relative to the job's profiler-output
            name = parse_trace_key(key)
            assert name is not None, key
            parsed = parse_trace_file(data, key, name.node_id)
            assert parsed.damage == [] and not parsed.partial_last_line
            doc = json.loads(data)
            base = next(e["args"]["start_time_since_epoch_in_micros"] for e in doc
                        if e["ph"] == "M" and "start_time_since_epoch_in_micros" in e.get("args", {}))
            complete = [e for e in doc if e["ph"] == "X"]
            assert len(parsed.records) == len(complete) > 0
            for ev, raw in zip(parsed.records, complete, strict=True):
                assert ev.name == raw["name"] and ev.start_us == base + raw["ts"]
                assert ev.duration_us == raw["dur"] and ev.node == name.node_id
            # smdebug names a trace file after the end of its last event.
            if name.suffix.endswith("model_timeline.json"):
                assert max(e.end_us for e in parsed.records) == name.end_us


def test_reader_on_the_fixture_folders(profiler_fixtures: Path) -> None:
    system = ProfilerReader(profiler_fixtures / "test_traces")
    result = system.refresh()
    assert (result.files, result.samples, result.events, result.damage) == (4, 78, 1, 0)
    cores = system.system.keys(type="cpu", dimension="CPUUtilization")
    assert [k.name for k in cores][:3] == ["cpu0", "cpu1", "cpu2"] and len(cores) == 32
    cpu11 = system.system.series(SeriesKey("algo-1", "cpu", "cpu11", "CPUUtilization"))
    assert cpu11.values.tolist() == [51.1, 55.99]
    assert cpu11.timestamps_us.tolist() == [round(1591748109.2321954 * 1e6), round(1591748169.2323716 * 1e6)]
    # One instant of every core side by side.
    stamps, matrix = system.system.aligned(cores, start_us=1591748160_000000, end_us=1591748170_000000)
    assert stamps.tolist() == [round(1591748169.2323716 * 1e6)] and matrix.shape == (1, 32)
    assert not np.isnan(matrix).any()
    gpu = system.system.select(type="gpu", dimension="GPUUtilization")
    assert sorted(k.name for k in gpu) == ["gpu0", "gpu1"]
    (event,) = system.framework.events()
    assert event.phase == "RotationPolicyTest_file_size" and event.args == {"step_num": 1}
    assert event.node == "4487"

    timeline = ProfilerReader(profiler_fixtures / "model_timeline_traces")
    assert timeline.refresh().events == 57
    assert {e.phase for e in timeline.framework.events()} == {"DataIterator", "NcclManager"}
    (allreduce,) = timeline.framework.events(name="kAllReduce")
    assert allreduce.start_us == 1590461107892211 + 31901600 and allreduce.end_us == 1590461139923994
    # Window queries return overlapping events only.
    assert timeline.framework.events(start_us=allreduce.end_us) == []
    assert timeline.framework.events(start_us=allreduce.end_us - 1) == [allreduce]


def _job_with_system_file(root: Path, text: str) -> str:
    key = "system/incremental/2020060305/1591160699.algo-1.json"
    (root / key).parent.mkdir(parents=True)
    (root / key).write_text(text)
    return key


def test_corrupt_last_line_is_skipped(profiler_fixtures: Path, tmp_path: Path) -> None:
    _job_with_system_file(tmp_path, (profiler_fixtures / "1591160699.algo-1.json.corrupt").read_text())
    reader = ProfilerReader(tmp_path, strict=True)
    result = reader.refresh()
    assert (result.samples, result.damage, result.partial_lines) == (13, 0, 1)
    assert reader.damage == []


def test_corrupt_middle_line_is_reported_with_file_and_line(profiler_fixtures: Path, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    lines = (profiler_fixtures / "1591160699.algo-1.json.corrupt").read_text().splitlines()
    damaged = lines.pop()  # the cut line, now in the middle of the file
    lines.insert(5, damaged)
    key = _job_with_system_file(tmp_path, "\n".join(lines) + "\n")
    reader = ProfilerReader(tmp_path)
    result = reader.refresh()
    assert (result.samples, result.damage, result.partial_lines) == (13, 1, 0)
    (damage,) = reader.damage
    assert (damage.key, damage.line) == (key, 6)
    assert f"{key} line 6" in caplog.text
    with pytest.raises(ProfilerDataError, match="line 6"):
        ProfilerReader(tmp_path, strict=True).refresh()


def test_trace_cut_short_and_trace_damaged_inside(profiler_fixtures: Path, tmp_path: Path) -> None:
    src = profiler_fixtures / "model_timeline_traces/framework/pevents/2020052602/1590461127873222_0001_model_timeline.json"
    whole = src.read_bytes()
    key = "framework/pevents/2020052602/1590461127873222_0001_model_timeline.json"
    cut = whole[: whole.rindex(b'{"ph"') + 20]  # the writer stopped inside the last event: no "]"
    parsed = parse_trace_file(cut, key, "0001")
    assert parsed.partial_last_line and parsed.damage == [] and len(parsed.records) == 56 - 1

    lines = whole.decode().splitlines()
    lines[10] = lines[10][:25]
    parsed = parse_trace_file("\n".join(lines).encode(), key, "0001")
    assert [(d.key, d.line) for d in parsed.damage] == [(key, 11)] and len(parsed.records) == 55

    path = tmp_path / key
    path.parent.mkdir(parents=True)
    shutil.copy(src, path)
    path.write_bytes(cut)
    reader = ProfilerReader(tmp_path, strict=True)
    assert reader.refresh().events == 55


def test_a_pretty_printed_trace_is_read_as_one_document(tmp_path: Path) -> None:
    doc = {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1_000_000}},
        {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "Step:ModeKeys.EVAL"}},
        {"name": "Step:ModeKeys.EVAL", "ph": "X", "pid": 3, "ts": 10, "dur": 5, "args": {"step_num": "7"}},
    ]}
    parsed = parse_trace_file(json.dumps(doc, indent=2).encode(), "k", "n")
    (ev,) = parsed.records
    assert (ev.phase, ev.start_us, ev.end_us) == ("Step:ModeKeys.EVAL", 1_000_010, 1_000_015)
    parsed = parse_trace_file(b'{"not": "a trace"', "k", "n")
    assert parsed.records == [] and parsed.damage[0].key == "k"


def test_file_spans_streams_and_sources(profiler_fixtures: Path) -> None:
    """What smdebug's metrics readers expose: the first and latest file timestamps of each stream,
    one stream followed alone, and each event's file kind (file_suffix_filter)."""
    both = ProfilerReader(profiler_fixtures / "test_traces")
    assert both.file_span("system") is None
    both.refresh()
    assert both.file_span("system") == (1591160699_000000, 1591748160_000000)
    assert both.file_span("framework") == (1589930988000000, 1589930988000000)
    assert {e.source for e in both.framework.events()} == {"0000_pythontimeline.json"}
    system_only = ProfilerReader(profiler_fixtures / "test_traces", streams=("system",))
    result = system_only.refresh()
    assert (result.samples, result.events) == (78, 0) and system_only.file_span("framework") is None
    timeline = ProfilerReader(profiler_fixtures / "model_timeline_traces", streams=("framework",))
    timeline.refresh()
    assert {e.source for e in timeline.framework.events()} == {"model_timeline.json"}
    with pytest.raises(ValueError, match="streams"):
        ProfilerReader(profiler_fixtures, streams=("gpu",))
