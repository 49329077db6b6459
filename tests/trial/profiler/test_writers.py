"""The writers: SageMaker's system-metric lines and smdebug's trace files, rotation, round trips."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler import ProfilerReader, Sample, SeriesKey, SystemMetricsWriter, TraceWriter
from sdlocal.trial.profiler.names import parse_system_key, parse_trace_key
from sdlocal.trial.storage import LocalStorage

T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC


def _files(root: Path, pattern: str = "*") -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(pattern) if p.is_file())


def test_system_lines_are_sagemakers_byte_for_byte(profiler_fixtures: Path, tmp_path: Path) -> None:
    src = profiler_fixtures / "test_traces/system/incremental/1591748160.algo-1.json"
    lines = src.read_text().splitlines()
    w = SystemMetricsWriter(tmp_path)
    for line in lines:
        obj = json.loads(line)
        w.write([Sample(obj["Type"], obj["Name"], obj["Dimension"], obj["Value"])], obj["Timestamp"])
    (path,) = [w.close()]
    assert path is not None
    assert path.relative_to(tmp_path).as_posix() == "system/incremental/2020061000/1591748160.algo-1.json"
    assert path.read_text().splitlines() == lines


def test_system_values_are_rounded_and_bad_input_refused(tmp_path: Path) -> None:
    w = SystemMetricsWriter(tmp_path, node_id="algo-2")
    w.write([Sample("memory", "MemoryUsedPercent", "", 12.3456), Sample("cpu", "cpu0", "CPUUtilization", 100.0)], T0 + 0.5)
    path = w.close()
    assert path is not None and path.name == f"{T0 - T0 % 60}.algo-2.json"
    assert path.read_text() == (
        '{"Type":"memory","Name":"MemoryUsedPercent","Dimension":"","Value":12.35,"NodeId":"algo-2","Timestamp":1700000000.5}\n'
        '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":100,"NodeId":"algo-2","Timestamp":1700000000.5}\n')
    with pytest.raises(ValueError, match="finite"):
        w.write([Sample("cpu", "cpu0", "CPUUtilization", float("nan"))], T0)
    with pytest.raises(ValueError, match="node id"):
        SystemMetricsWriter(tmp_path, node_id="algo.1")
    with pytest.raises(ValueError, match="whole number"):
        SystemMetricsWriter(tmp_path, close_interval_s=0.5)  # type: ignore[arg-type]


def test_system_files_rotate_per_minute_and_stay_tmp_while_open(tmp_path: Path) -> None:
    w = SystemMetricsWriter(tmp_path)
    start = 1_700_002_740  # 22:59:00 UTC: the next minute is in the next hour folder
    cpu = [Sample("cpu", "cpu0", "CPUUtilization", 1.0)]
    for t in np.arange(start, start + 90, 0.5):
        w.write(cpu, float(t))
        if t == start + 30:
            # The open file is only a .tmp: the uploader and the reader skip it.
            assert _files(tmp_path) == ["system/incremental/2023111422/1700002740.algo-1.json.tmp"]
            assert LocalStorage(tmp_path).list("system/") == []
    assert _files(tmp_path) == ["system/incremental/2023111422/1700002740.algo-1.json",
                                "system/incremental/2023111423/1700002800.algo-1.json.tmp"]
    assert w.close_if_due(start + 119.9) is None
    assert w.close_if_due(start + 120) == tmp_path / "system/incremental/2023111423/1700002800.algo-1.json"
    assert w.close() is None
    counts = [len((tmp_path / k).read_text().splitlines()) for k in _files(tmp_path)]
    assert counts == [120, 60]
    # A sample stamped before the last closed period (the clock stepped back) opens the next one.
    w.write(cpu, start + 1)
    assert w.close() == tmp_path / "system/incremental/2023111423/1700002860.algo-1.json"


def test_system_close_interval_of_seconds(tmp_path: Path) -> None:
    w = SystemMetricsWriter(tmp_path, close_interval_s=2)
    for i in range(10):
        w.write([Sample("cpu", "cpu0", "CPUUtilization", i)], T0 + i * 0.5)
    w.close()
    names = [parse_system_key(k) for k in _files(tmp_path)]
    assert [n.start_us // 1_000_000 for n in names if n] == [T0, T0 + 2, T0 + 4]


class FakeClock:
    def __init__(self, now_us: int) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us


def _trace(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    assert isinstance(doc, list)
    return doc


def test_trace_file_layout(tmp_path: Path) -> None:
    clock = FakeClock(T0 * 1_000_000)
    w = TraceWriter(tmp_path, "0-algo-1", clock_us=clock)
    assert _files(tmp_path) == []  # nothing before the first event
    base = w.start_time_us
    w.record_step("TRAIN", 0, base + 100, base + 900)
    w.record("Forward", "Net", base + 110, base + 400, {"step_num": 0})
    w.record("DataLoaderIter", "_SingleProcessDataLoaderIter.__next__", base + 50, base + 90,
             {"num_workers": 0, "pin_memory": False})
    w.record_step("TRAIN", 1, base + 1000, base + 1500)
    assert _files(tmp_path) == ["framework/0-algo-1_model_timeline.json.tmp"]
    path = w.close()
    assert path == tmp_path / f"framework/pevents/2023111422/{base + 1500}_0-algo-1_model_timeline.json"
    doc = _trace(path)
    assert doc[:2] == [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": base}},
        {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    ]
    meta = {e["pid"]: e["args"]["name"] for e in doc if e["name"] == "process_name" and e["pid"]}
    assert meta == {1: "Step:ModeKeys.TRAIN", 2: "Forward", 3: "DataLoaderIter"}
    events = [e for e in doc if e["ph"] == "X"]
    assert events[0] == {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 100, "dur": 800, "args": {"step_num": 0}}
    assert [e["pid"] for e in events] == [1, 2, 3, 1]
    assert path.read_text().startswith("[\n{") and path.read_text().endswith("}\n]\n")
    assert len(path.read_text().splitlines()) == len(doc) + 2  # one event per line


def test_trace_rotation_by_size_and_by_interval(tmp_path: Path) -> None:
    clock = FakeClock(T0 * 1_000_000)
    w = TraceWriter(tmp_path, "0-algo-1", clock_us=clock, max_file_size=2000, close_interval_s=10)
    base = w.start_time_us
    for step in range(40):
        clock.now_us = base + step * 100_000
        w.record_step("TRAIN", step, clock.now_us, clock.now_us + 50_000)
    sized = list(w.closed_files)
    for path in sized:
        x = [e for e in _trace(path) if e["ph"] == "X"]
        assert max(e["ts"] + e["dur"] for e in x) + base == parse_trace_key(path.relative_to(tmp_path).as_posix()).end_us  # type: ignore[union-attr]
    assert len(sized) >= 2  # by size: the clock moved 4 s, less than the interval
    w.flush()
    w.record_step("TRAIN", 40, clock.now_us, clock.now_us + 5)  # opens a file now
    clock.now_us += 9_999_999
    assert w.close_if_due() is None
    clock.now_us += 1
    assert w.close_if_due() is not None  # open 10 s: closed without a new event
    w.record_step("EVAL", 0, clock.now_us, clock.now_us + 5)
    w.close()
    keys = _files(tmp_path)
    assert not any(k.endswith(".tmp") for k in keys)
    names = [parse_trace_key(k) for k in keys]
    assert [n.end_us for n in names if n] == sorted(n.end_us for n in names if n)
    steps = []
    for k in keys:
        doc = _trace(tmp_path / k)
        assert doc[0]["args"]["start_time_since_epoch_in_micros"] == base  # every file says T0
        x = [e for e in doc if e["ph"] == "X"]
        # Named after the end of its last event (1 µs after the previous name when that is later).
        assert max(e["ts"] + e["dur"] for e in x) + base <= parse_trace_key(k).end_us  # type: ignore[union-attr]
        for e in x:
            assert any(m["pid"] == e["pid"] and m["name"] == "process_name" for m in doc)  # declared in this file
        steps += [(e["name"], e["args"]["step_num"]) for e in x]
    assert steps == [("Step:ModeKeys.TRAIN", s) for s in range(41)] + [("Step:ModeKeys.EVAL", 0)]


def test_trace_writer_threads_and_names(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path, "1234-algo-1", max_file_size=5000)

    def work(t: int) -> None:
        for i in range(200):
            now = w.clock_us()
            w.record(f"thread{t}", "op", now, now + i, {"i": i})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    w.close()
    reader = ProfilerReader(tmp_path)
    assert reader.refresh().events == 800
    for t in range(4):
        assert sorted(e.args["i"] for e in reader.framework.events(phase=f"thread{t}")) == list(range(200))  # type: ignore[index]
    with pytest.raises(ValueError, match="node id"):
        TraceWriter(tmp_path, "0_algo-1")


def test_round_trip_through_the_reader(tmp_path: Path) -> None:
    sysw = SystemMetricsWriter(tmp_path, close_interval_s=5)
    rng = np.random.default_rng(0)
    written: dict[SeriesKey, list[tuple[int, float]]] = {}
    for i in range(40):
        ts = T0 + i * 0.5
        samples = [Sample("cpu", f"cpu{c}", "CPUUtilization", round(float(rng.uniform(0, 100)), 2)) for c in range(12)]
        samples.append(Sample("gpu", "gpu0", "GPUMemoryUtilization", round(float(rng.uniform(0, 100)), 2)))
        sysw.write(samples, ts)
        for s in samples:
            written.setdefault(SeriesKey("algo-1", s.type, s.name, s.dimension), []).append((round(ts * 1e6), s.value))
    sysw.write_end_marker()
    tw = TraceWriter(tmp_path, "0-algo-1", start_time_us=T0 * 1_000_000)
    for step in range(10):
        start = T0 * 1_000_000 + step * 1000
        tw.record_step("TRAIN" if step < 8 else "EVAL", step, start, start + 700 + step)
    tw.write_end_marker()

    reader = ProfilerReader(tmp_path)
    reader.refresh()
    assert reader.training_ended() and reader.loaded_all and reader.damage == []
    assert set(reader.system.keys()) == set(written)
    assert [k.name for k in reader.system.keys(type="cpu")][-3:] == ["cpu9", "cpu10", "cpu11"]
    for key, pairs in written.items():
        s = reader.system.series(key)
        assert s.timestamps_us.tolist() == [p[0] for p in pairs] and s.values.tolist() == [p[1] for p in pairs]
    window = reader.system.series(SeriesKey("algo-1", "cpu", "cpu3", "CPUUtilization"),
                                  start_us=(T0 + 2) * 1_000_000, end_us=(T0 + 4) * 1_000_000)
    assert len(window) == 4  # [T0+2, T0+4): 2.0, 2.5, 3.0, 3.5
    train = reader.framework.steps(mode=ModeKeys.TRAIN)
    assert train.step.tolist() == list(range(8)) and train.duration_us.tolist() == [700 + s for s in range(8)]
    assert reader.framework.steps(mode="EVAL").step.tolist() == [8, 9]
    late = reader.framework.steps(start_us=T0 * 1_000_000 + 5000)
    assert late.step.tolist() == [5, 6, 7, 8, 9]
    cols = reader.framework.arrays()
    assert cols.phases == ["Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"] and cols.start_us.shape == (10,)


def test_record_many_writes_what_record_writes(tmp_path: Path) -> None:
    """The batch path (the hook's background writer) gives the same bytes and the same rotation."""
    events = []
    for i in range(30):
        t = T0 * 1_000_000 + i * 1000
        events += [("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", t, t + 900, {"step_num": i}),
                   ("Forward", "Net", t, t + 300, {"step_num": i}),
                   ("DataLoaderIter", "it::GetNext", t - 50, t, {"num_workers": 2, "pin_memory": False}),
                   ("Weird \"phase\"", "n\u00e9", t, t, {"k-ey": 1, "v": [1, "x"]}),
                   ("Forward", "Net", t + 5, t + 2, None)]
    roots = []
    for batch in (False, True):
        root = tmp_path / ("many" if batch else "one")
        w = TraceWriter(root, "0-algo-1", clock_us=FakeClock(T0 * 1_000_000), max_file_size=3000)
        if batch:
            assert w.record_many(events[:70]) == 70
            assert w.record_many(iter(events[70:])) == len(events) - 70
        else:
            for e in events:
                w.record(*e)
        w.close()
        roots.append(root)
    one, many = (sorted(p.relative_to(r).as_posix() for p in r.rglob("*") if p.is_file()) for r in roots)
    assert one == many and len(one) >= 3  # rotated by size at the same events
    for key in one:
        assert (roots[0] / key).read_bytes() == (roots[1] / key).read_bytes()
