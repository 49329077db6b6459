"""FrameworkEvents fed in many small batches, out of order (as live polls bring trace files),
answers exactly as one fed everything at once: events, columns and steps."""
from __future__ import annotations

import numpy as np

from sdlocal.trial.profiler import FrameworkEvents, TraceEvent


def _events(n: int, seed: int) -> list[TraceEvent]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        start = int(rng.integers(0, 10_000)) * 10  # ties included
        phase = ["Step:ModeKeys.TRAIN", "Forward", "Step:ModeKeys.EVAL", "DataLoaderIter"][i % 4]
        out.append(TraceEvent(f"n{i % 7}", phase, start, start + int(rng.integers(0, 500)), i % 4, 0,
                              "0-algo-1", {"step_num": i}))
    return out


def _same(a: FrameworkEvents, b: FrameworkEvents) -> None:
    assert len(a) == len(b)
    assert a.events() == b.events() and a.events(20_000, 40_000, phase="Forward") == b.events(20_000, 40_000, phase="Forward")
    ca, cb = a.arrays(), b.arrays()
    assert ca.start_us.tolist() == cb.start_us.tolist() and ca.end_us.tolist() == cb.end_us.tolist()
    assert [ca.phases[i] for i in ca.phase_id] == [cb.phases[i] for i in cb.phase_id]
    assert [ca.names[i] for i in ca.name_id] == [cb.names[i] for i in cb.name_id]
    for mode in (None, "TRAIN", "EVAL"):
        sa, sb = a.steps(mode), b.steps(mode)
        assert [c.tolist() for c in sa] == [c.tolist() for c in sb]
    assert a.time_range() == b.time_range() and a.latest_end_by_node() == b.latest_end_by_node()


def test_small_batches_out_of_order_match_one_batch() -> None:
    events = _events(2000, seed=1)
    whole = FrameworkEvents()
    whole.add(events)
    live = FrameworkEvents()
    live.add(events[:500])  # a backlog first
    live.arrays(), live.steps()  # caches built, then kept up to date
    for i in range(500, 2000, 7):
        live.add(events[i:i + 7])
        if i % 3 == 0:
            live.arrays()
        if i % 5 == 0:
            live.steps("TRAIN")
    _same(live, whole)
    live.add(events[:300])  # a backlog again (duplicates are events too)
    whole.add(events[:300])
    _same(live, whole)


def test_system_series_read_between_batches_match_one_batch() -> None:
    from sdlocal.trial.profiler import SystemMetrics, SystemRecord

    rng = np.random.default_rng(2)
    records = [SystemRecord("algo-1", "cpu", f"cpu{i % 3}", "CPUUtilization", int(t), float(v))
               for i, (t, v) in enumerate(zip(rng.integers(0, 10**6, 900), rng.uniform(0, 100, 900), strict=True))]
    whole, live = SystemMetrics(), SystemMetrics()
    whole.add(records)
    for i in range(0, 900, 50):  # a late file's older samples are merged in by time
        live.add(records[i:i + 50])
        live.series(live.keys()[0])
    for key in whole.keys():
        a, b = whole.series(key), live.series(key)
        assert a.timestamps_us.tolist() == b.timestamps_us.tolist() == sorted(a.timestamps_us.tolist())
        assert a.values.tolist() == b.values.tolist()
    assert whole.latest_by_node() == live.latest_by_node() and whole.time_range() == live.time_range()
