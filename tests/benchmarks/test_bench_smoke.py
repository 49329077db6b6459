"""The benchmark harness runs end to end in quick mode (no timing is asserted: timings are the
harness's output, not a property a unit test can check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks.errors import BenchmarkError
from benchmarks.verify import EXPECTED_TENSORS, check_trial, expected_steps

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run_quick(tmp_path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    results_dir = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "run.py"), "--quick", "--results-dir", str(results_dir),
         "--work-dir", str(tmp_path / "work"), *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [result_file] = results_dir.glob("bench-quick-*.json")
    results = json.loads(result_file.read_text())
    assert results["markdown"] in proc.stdout
    return dict(results)


@pytest.mark.slow
def test_quick_run_of_our_side(tmp_path: Path) -> None:
    results = _run_quick(tmp_path, "--no-smdebug", "--parts", "train,read")

    runs = results["training"]["runs"]
    assert sorted({r["variant"] for r in runs}) == ["none-ours", "ours"]
    hooked = [r for r in runs if r["variant"] == "ours"]
    assert sorted(r["interval"] for r in hooked) == [1, 10, 100]
    total = results["settings"]["warmup"] + results["settings"]["steps"]
    for run in hooked:  # the harness verified each trial; the counts it recorded say so
        assert run["saved_steps"] == len(expected_steps(total, run["interval"]))
        assert run["tensors_per_step"] == len(EXPECTED_TENSORS)
        assert run["torch_threads"] == 1
    assert all(r["step_ms"] > 0 for r in runs)

    reading = results["reading"]
    assert reading["trial_writer"] == "ours" and reading["same_data"]
    assert reading["runs"][0]["values"] == results["settings"]["read_steps"] * len(EXPECTED_TENSORS)
    assert list(tmp_path.joinpath("work").iterdir()) == []  # trials cleaned up


@pytest.mark.slow
@pytest.mark.interop
def test_quick_run_side_by_side_with_smdebug(tmp_path: Path, smdebug_python: Path) -> None:
    # the reader part beside smdebug is test_reader_bench's (benchmarks/reader.py, which run.py calls);
    # run.py's own use of it runs in test_quick_run_of_our_side
    results = _run_quick(tmp_path, "--smdebug-python", str(smdebug_python), "--parts", "train,read")

    variants = {r["variant"] for r in results["training"]["runs"]}
    assert variants == {"none-ours", "ours", "none-smdebug", "smdebug"}
    assert all("saved_steps" in r for r in results["training"]["runs"] if not r["variant"].startswith("none"))
    reading = results["reading"]
    assert reading["trial_writer"] == "smdebug"
    assert {r["variant"] for r in reading["runs"]} == {"ours", "bytes", "smdebug", "smdebug-nodelay"}
    decoded = [r for r in reading["runs"] if r["variant"] != "bytes"]
    assert len({(r["values"], r["elements"]) for r in decoded}) == 1  # same data read by both
    assert reading["summary"]["ratio_smdebug_nodelay"] is not None


def _write_index(trial: Path, step: int, names: list[str]) -> None:
    events = f"events/{step:012d}/{step:012d}_worker_0.tfevents"
    (trial / events).parent.mkdir(parents=True, exist_ok=True)
    (trial / events).write_bytes(b"")
    index = trial / "index" / "000000000" / f"{step:012d}_worker_0.json"
    index.parent.mkdir(parents=True, exist_ok=True)
    payload = [{"tensorname": n, "start_idx": 0, "length": 0} for n in names]
    index.write_text(json.dumps({"meta": {"mode": "TRAIN", "mode_step": step, "event_file_name": events},
                                 "tensor_payload": payload, "shape_payload": []}))


def _collections(trial: Path) -> None:
    path = trial / "collections" / "000000000" / "worker_0_collections.json"
    path.parent.mkdir(parents=True)
    path.write_text("{}")


def test_check_trial_accepts_exactly_the_due_steps(tmp_path: Path) -> None:
    _collections(tmp_path)
    for step in (0, 10, 20):
        _write_index(tmp_path, step, sorted(EXPECTED_TENSORS))
    assert check_trial(tmp_path, total_steps=25, interval=10) == {"saved_steps": 3, "tensors_per_step": 13}


def test_check_trial_rejects_a_missing_step_or_tensor(tmp_path: Path) -> None:
    _collections(tmp_path)
    _write_index(tmp_path, 0, sorted(EXPECTED_TENSORS))
    with pytest.raises(BenchmarkError, match="expected 2 saved steps"):
        check_trial(tmp_path, total_steps=11, interval=10)
    _write_index(tmp_path, 10, sorted(EXPECTED_TENSORS - {"gradient/Net_fc1.weight"}))
    with pytest.raises(BenchmarkError, match=r"missing \['gradient/Net_fc1.weight'\]"):
        check_trial(tmp_path, total_steps=11, interval=10)


def test_check_trial_rejects_an_empty_trial(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="expected 1 saved steps"):
        check_trial(tmp_path, total_steps=1, interval=100)


def test_overhead_ratio_and_verdicts() -> None:
    def run(variant: str, interval: int, wall: float, cpu: float) -> dict[str, object]:
        return {"variant": variant, "interval": interval, "round": 0, "step_ms": wall, "cpu_step_ms": cpu}

    runs = [
        run("none-ours", 0, 10.0, 10.0),
        run("none-smdebug", 0, 8.0, 8.0),
        run("ours", 1, 12.0, 15.0),
        run("smdebug", 1, 16.0, 16.0),
        run("ours", 100, 9.9, 10.4),
        run("smdebug", 100, 8.4, 8.0),
    ]
    summary = report.summarize_training(runs, [1, 100])
    rows = {r["interval"]: r for r in summary["intervals"]}
    assert rows[1]["ours_overhead"] == pytest.approx(0.2)
    assert rows[1]["smdebug_overhead"] == pytest.approx(1.0)
    assert rows[1]["ratio"] == pytest.approx(5.0) and rows[1]["ratio_verdict"] == "PASS"
    assert rows[1]["ratio_cpu"] == pytest.approx(2.0) and rows[1]["ratio_cpu_verdict"] == "PASS"
    assert rows[1]["ours_paired_overhead"] == pytest.approx(0.2)
    assert rows[100]["ratio"] == float("inf") and rows[100]["ours_max_verdict"] == "PASS"
    # CPU: ours +4% while smdebug's +0% is within noise: no ratio can be told, and that is said
    assert rows[100]["ratio_cpu"] == 0.0 and rows[100]["ratio_cpu_verdict"] == "FAIL"
    assert rows[100]["ours_cpu_max_verdict"] == "PASS"
    assert report.overhead_ratio(-0.01, -0.02) is None
    text = report.markdown({"settings": {"mode": "quick", "steps": 1, "warmup": 0, "repeats": 1, "read_repeats": 1},
                            "machine": {"cpus": 2, "work_dir_kind": "tmpfs"}, "training": {"summary": summary}})
    assert "| 1 | 12.00 | 16.00 | +20.0% | +100.0% | 5.0× | PASS |  |" in text
    assert "| 100 | 9.90 | 8.40 | -1.0% | +5.0% | ∞ (ours ≤ baseline) | PASS | PASS |" in text


def test_readers_that_disagree_are_reported() -> None:
    same = {"values": 2, "elements": 8, "checksum": 1.5}
    assert report.check_same_read([{"variant": "ours", **same}, {"variant": "smdebug", **same}]) is None
    other = {**same, "checksum": 1.6}
    assert "checksums differ" in str(report.check_same_read([{"variant": "ours", **same},
                                                              {"variant": "smdebug", **other}]))


@pytest.mark.slow
def test_one_command_runs_the_reader_part_through_smdebugs_api_too(tmp_path: Path) -> None:
    """`run.py --parts reader`: our reader and sdlocal's smdebug facade read the same values of
    every trial, and the figures printed are those of the runs (GB/s = bytes / median time), with
    the load average."""
    results = _run_quick(tmp_path, "--no-smdebug", "--parts", "reader")
    assert "training" not in results and "reading" not in results
    part = results["reader"]
    runs = part["runs"]
    assert {r["variant"] for r in runs} == {"ours", "facade"}
    assert {(r["workload"], r["writer"]) for r in runs} == {("small", "ours"), ("large", "ours")}
    for key in {(r["workload"], r["writer"]) for r in runs}:
        read = {(r["values"], r["elements"], r["checksum"]) for r in runs if (r["workload"], r["writer"]) == key}
        assert len(read) == 1 and next(iter(read))[0] > 0  # both ways in read the same, non-empty data
    large = next(row for row in part["summary"] if row["workload"] == "large")
    for reader in ("ours", "facade"):
        [run] = [r for r in runs if r["workload"] == "large" and r["variant"] == reader]
        assert large[reader]["median_s"] == run["read_s"]
        assert large[reader]["gbps_median"] == pytest.approx(run["bytes"] / run["read_s"] / 1e9)
    assert large["verdict"] in ("PASS", "FAIL")
    assert "via smdebug API GB/s" in results["markdown"] and "Load average at the end" in results["markdown"]
    assert list(tmp_path.joinpath("work").iterdir()) == []  # trials cleaned up


@pytest.mark.slow
def test_one_command_runs_the_s3_part_too(tmp_path: Path) -> None:
    """`run.py --parts s3`: benchmarks/s3_read.py in the same run, its figures in the report (large
    values by both servers, small values), its trials cleaned up."""
    results = _run_quick(tmp_path, "--no-smdebug", "--no-localstack", "--parts", "s3")
    part = results["s3"]
    assert part["localstack"] is False
    assert {r["server"] for r in part["runs"]} == {"ranged", "whole"}
    assert {r["variant"] for r in part["small_runs"]} == {"ours", "facade"}
    text = results["markdown"]
    assert "| trial by | reader | server |" in text and "| server | trial by | reader | values |" in text
    assert "\n\n| server | trial by" in text  # two tables, not one
    assert list(tmp_path.joinpath("work").iterdir()) == []
