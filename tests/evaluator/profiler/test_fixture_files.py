"""The profiler rules on the files SageMaker and smdebug wrote (tests/fixtures/smdebug-profiler),
their figures checked against the raw JSON read here independently."""
from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.profiler_rules import (
    LoadBalancing,
    OverallFrameworkMetrics,
    OverallSystemUsage,
    ProfilerReport,
)
from sdlocal.evaluator.rule import Verdict
from tests.evaluator.profiler._streams import finished_trial, judge_all

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "smdebug-profiler"


def raw_system(folder: Path) -> dict[tuple[str, str], list[float]]:
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(folder.rglob("*.algo-1.json")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the half-written last line of the .corrupt sample
            values[(record["Name"], record["Dimension"])].append(record["Value"])
    return values


def test_every_rule_reads_smdebugs_system_and_trace_files() -> None:
    trial = finished_trial(FIXTURES / "test_traces")
    rule = ProfilerReport(trial, LoadBalancing_patience="0", LoadBalancing_min_samples="1")
    assert judge_all(rule) is Verdict.CONDITION_MET
    # the trace (one event, 2020-05-19) and the system files (2020-06-03 to 06-10) are three weeks
    # apart with no step between; the two GPUs' few samples share no 2-% bin
    assert {r.rule_name for r in rule.rules if r.report["RuleTriggered"]} == {"MaxInitializationTime", "LoadBalancing"}
    usage = next(r for r in rule.rules if isinstance(r, OverallSystemUsage)).report["Details"]["algo-1"]
    raw = raw_system(FIXTURES / "test_traces")
    for gpu in ("gpu0", "gpu1"):
        assert usage[gpu]["max"] == max(raw[(gpu, "GPUUtilization")])
        assert usage[f"{gpu}_memory"]["p50"] == pytest.approx(float(np.median(raw[(gpu, "GPUMemoryUtilization")])))
    assert usage["cpu_busiest_core"]["max"] == max(v for (n, d), vs in raw.items() if d == "CPUUtilization" for v in vs)
    balance = next(r for r in rule.rules if isinstance(r, LoadBalancing)).report["Details"]
    assert {g: sum(h) for g, h in balance["workloads"].items()} == {"algo-1/gpu0": 2, "algo-1/gpu1": 2}
    assert set(balance["distances"]["algo-1/gpu0"]) == {"algo-1/gpu1"}


def test_model_timeline_trace_phases() -> None:
    folder = FIXTURES / "model_timeline_traces"
    totals: dict[str, float] = defaultdict(float)
    for path in sorted(folder.rglob("*.json")):
        events = json.loads(path.read_text())
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name" and "name" in e["args"]}
        for e in events:
            if e.get("ph") == "X":
                totals[names[e["pid"]]] += e["dur"] / 1e6
    rule = OverallFrameworkMetrics(finished_trial(folder))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["Details"]["phases"] == {k: pytest.approx(v) for k, v in totals.items()}
    assert set(totals) == {"DataIterator", "NcclManager"} and rule.report["Details"]["steps"] == {}


def test_a_half_written_last_line_is_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "system" / "incremental" / "2020060305"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "1591160699.algo-1.json.corrupt", folder / "1591160699.algo-1.json")
    rule = OverallSystemUsage(finished_trial(tmp_path))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    raw = raw_system(tmp_path)
    assert rule.report["Datapoints"] == sum(len(v) for v in raw.values()) == 13
    assert rule.report["Details"]["algo-1"]["gpu1_memory"]["max"] == max(raw[("gpu1", "GPUMemoryUtilization")]) == 84.76
