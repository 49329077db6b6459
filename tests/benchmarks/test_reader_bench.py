"""The reader benchmark (benchmarks/reader.py) end to end in quick mode, and its arithmetic. No
timing is asserted: timings are the benchmark's output, not a property a unit test can check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import reader_report
from benchmarks.reader import LARGE_TENSORS, QUICK, SMALL_TENSORS

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run_quick(tmp_path: Path, *extra: str) -> dict[str, Any]:
    results_dir = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "reader.py"), "--quick", "--results-dir", str(results_dir),
         "--work-dir", str(tmp_path / "work"), *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [result_file] = results_dir.glob("reader-quick-*.json")
    results: dict[str, Any] = json.loads(result_file.read_text())
    assert results["markdown"] in proc.stdout
    assert list((tmp_path / "work").iterdir()) == []  # trials cleaned up
    return results


def _expected(workload: str) -> int:
    return QUICK.small_steps * SMALL_TENSORS if workload == "small" else QUICK.large_steps * LARGE_TENSORS


@pytest.mark.slow
def test_quick_run_of_our_side_against_a_baseline_checkout(tmp_path: Path) -> None:
    # the baseline reader is this same checkout: the before/after machinery, not a comparison
    results = _run_quick(tmp_path, "--no-smdebug", "--baseline-root", str(REPO_ROOT))
    runs = results["runs"]
    assert {(r["workload"], r["writer"], r["variant"]) for r in runs} == {
        (w, "ours", v) for w in ("small", "large") for v in ("ours", "facade", "ours-baseline")}
    for run in runs:
        assert run["values"] == _expected(run["workload"])
        assert run["slept_s"] == 0.0 and run["read_s"] == run["total_s"] > 0
    rows = {r["workload"]: r for r in results["summary"]}
    assert rows["large"]["bytes"] == QUICK.large_steps * (QUICK.large_rows * QUICK.large_cols * 4 + 4)
    assert rows["large"]["ours"]["gbps_median"] > 0 and rows["small"]["verdict"] == "n/a"
    assert "ours before" in results["markdown"]


@pytest.mark.slow
@pytest.mark.interop
def test_quick_run_side_by_side_with_smdebug(tmp_path: Path, smdebug_python: Path) -> None:
    results = _run_quick(tmp_path, "--smdebug-python", str(smdebug_python), "--no-smdebug-fast")
    runs = results["runs"]
    # every reader (ours, ours through smdebug's API, smdebug's) read both writers' trials of both workloads
    assert {(r["workload"], r["writer"], r["variant"]) for r in runs} == {
        (w, wr, v) for w in ("small", "large") for wr in ("ours", "smdebug") for v in ("ours", "facade", "smdebug")}
    for run in runs:
        assert run["values"] == _expected(run["workload"])
        if run["variant"] == "smdebug":
            # its end-of-training sleep happened, was timed, and is not in read_s
            assert 0.9 < run["slept_s"] < 5 and run["read_s"] == pytest.approx(run["total_s"] - run["slept_s"])
        else:
            assert run["slept_s"] == 0.0
    for row in results["summary"]:
        assert row["ratio_paired"] is not None and row["verdict"] in ("PASS", "FAIL")
        assert row["ratio_as_shipped"] > row["ratio_median"]  # the sleep, taken out, was real


def _run(workload: str, writer: str, variant: str, read_s: float, round_no: int = 0, slept_s: float = 0.0,
         **kw: Any) -> dict[str, Any]:
    return {"workload": workload, "writer": writer, "variant": variant, "round": round_no, "read_s": read_s,
            "total_s": read_s + slept_s, "slept_s": slept_s, "cpu_s": read_s, "open_s": 0.01,
            "values": 10, "elements": 100, "bytes": 2_000_000_000, "checksum": 1.5, **kw}


def test_summary_ratios_throughput_and_verdicts() -> None:
    runs = [
        _run("small", "ours", "ours", 0.1, 0), _run("small", "ours", "ours", 0.2, 1), _run("small", "ours", "ours", 0.4, 2),
        _run("small", "ours", "smdebug", 2.0, 0, slept_s=1.0), _run("small", "ours", "smdebug", 1.0, 1, slept_s=1.0),
        _run("small", "ours", "smdebug", 3.0, 2, slept_s=1.0),
        _run("large", "smdebug", "ours", 1.0), _run("large", "smdebug", "smdebug", 8.0),
    ]
    small, large = reader_report.summarize(runs)
    assert small["ours"]["median_s"] == pytest.approx(0.2) and small["ours"]["min_s"] == pytest.approx(0.1)
    assert small["ratio_median"] == pytest.approx(10.0) and small["ratio_min"] == pytest.approx(10.0)
    assert small["ratio_paired"] == pytest.approx(7.5)  # per round: 20, 5, 7.5
    assert small["ratio_as_shipped"] == pytest.approx(15.0)
    assert small["verdict"] == "FAIL"  # the paired ratio decides
    assert large["ours"]["gbps_median"] == pytest.approx(2.0) and large["smdebug"]["gbps_median"] == pytest.approx(0.25)
    assert large["verdict"] == "PASS"
    faster = reader_report.summarize([_run("small", "ours", "ours", 0.1), _run("small", "ours", "smdebug", 1.2),
                                      _run("large", "ours", "ours", 2.5)])
    assert [r["verdict"] for r in faster] == ["PASS", "FAIL"]  # 12x; 0.8 GB/s
    text = reader_report.markdown({"settings": {**QUICK.__dict__, "mode": "quick"},
                                   "machine": {"cpus": 2, "work_dir_kind": "tmpfs"}, "summary": [small, large]})
    assert "| ours | 10 | 0.200 / 0.100 | 2.000 / 1.000 | 7.5× / 10.0× / 10.0× | 10.0× | 15.0× | FAIL |" in text
    assert "| smdebug | 2.00 / 2.00 | 0.25 / 0.25 | 8.0× | PASS |" in text


def test_readers_that_disagree_are_reported() -> None:
    same = [_run("small", "ours", "ours", 0.1), _run("small", "ours", "smdebug", 1.0),
            _run("large", "ours", "ours", 0.1, checksum=7.0)]  # another trial may differ
    assert reader_report.check_same_values(same) is None
    other = same + [_run("small", "ours", "smdebug", 1.0, checksum=1.6)]
    assert "small trial written by ours: checksums differ" in str(reader_report.check_same_values(other))
    fewer = same + [_run("large", "ours", "smdebug", 1.0, values=9, checksum=7.0)]
    assert "smdebug read 9 values" in str(reader_report.check_same_values(fewer))


def test_summary_with_smdebug_on_a_compiled_protobuf_and_the_first_use_of_values() -> None:
    runs = [
        _run("small", "ours", "ours", 0.1, 0, use_s=0.01), _run("small", "ours", "ours", 0.2, 1, use_s=0.01),
        _run("small", "ours", "smdebug", 2.0, 0, use_s=0.01, protobuf="python 3.20.3"),
        _run("small", "ours", "smdebug", 2.0, 1, use_s=0.01, protobuf="python 3.20.3"),
        _run("small", "ours", "smdebug-fast", 0.4, 0, use_s=0.01, protobuf="upb 5.29.5"),
        _run("small", "ours", "smdebug-fast", 1.0, 1, use_s=0.01, protobuf="upb 5.29.5"),
        _run("large", "ours", "ours", 0.5, use_s=0.5), _run("large", "ours", "smdebug", 4.0, use_s=0.5),
        _run("large", "ours", "smdebug-fast", 2.0, use_s=0.5),
    ]
    small, large = reader_report.summarize(runs)
    assert small["fast_ratio_paired"] == pytest.approx(4.5)  # per round: 4 and 5
    assert small["ratio_paired"] == pytest.approx(15.0)  # the pure-Python one: 20 and 10
    assert large["ours"]["gbps_median"] == pytest.approx(4.0)
    assert large["ours"]["gbps_use_median"] == pytest.approx(2.0)  # reading, then one pass over the values
    assert large["smdebug-fast"]["gbps_median"] == pytest.approx(1.0)
    text = reader_report.markdown({"settings": {**QUICK.__dict__, "mode": "quick"},
                                   "machine": {"cpus": 2, "work_dir_kind": "tmpfs"}, "summary": [small, large]})
    assert "smdebug parsed with protobuf python 3.20.3. smdebug-fast parsed with protobuf upb 5.29.5." in text
    assert " 0.700 / 0.400 | 4.5× / 4.7× |" in text  # smdebug-fast: median / fastest, paired / CPU ratio
    # then GB/s per CPU second (ours / smdebug), then smdebug-fast's GB/s
    assert "| ours | 4.00 / 4.00 | 0.50 / 0.50 | 8.0× | PASS | 2.00 / 2.00 | 4.00 / 0.50 | 1.00 |" in text
