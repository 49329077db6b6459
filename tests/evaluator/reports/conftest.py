"""Profiler output of realistic jobs (written once per session with trial.profiler's writers) and
the rule reports a ProfilerReport evaluation would give for them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.evaluator.reports._jobs import JobShape, WrittenJob, write_job

HOSTILE_RULE = '<img src="https://evil.example/x.png" onerror="alert(1)">Rule & "co"'


def rule_reports(job: WrittenJob) -> dict[str, dict[str, Any]]:
    """Reports shaped as the profiler rules write them (RuleParameters as "key:value" lines)."""
    return {
        "StepOutlier": {"RuleTriggered": 3, "Violations": len(job.outlier_steps), "Datapoints": job.train_steps,
                        "RuleParameters": "threshold:3\nmode:None\nn_outliers:10\nstddev:3",
                        "Details": {"step_stats": {"TRAIN": {"mean": 0.13, "max": 0.87, "p99": 0.14},
                                                   "EVAL": {"mean": 0.05, "max": 0.06, "p99": 0.06}}}},
        "CPUBottleneck": {"RuleTriggered": 12, "Violations": 900, "Datapoints": 1100,
                          "RuleParameters": "threshold:50\ncpu_threshold:90\ngpu_threshold:10\npatience:1000",
                          "Details": {"bottlenecks": 900, "low_gpu_samples": [1, 2, 3]}},
        "Dataloader": {"RuleTriggered": 1, "Violations": 1, "Datapoints": 1,
                       "RuleParameters": "min_threshold:70\nmax_threshold:200",
                       "Details": {"cores": 4, "dataloaders": 2}},
        "MaxInitializationTime": {"RuleTriggered": 0, "Violations": 0, "Datapoints": 1,
                                  "RuleParameters": "threshold:20", "Details": {}},
        # no GPU: nothing to judge; two GPUs at 30-60 %: underused
        "LowGPUUtilization": {"RuleTriggered": 4 if job.gpus else 0, "Violations": 4 * job.gpus,
                              "Datapoints": 8 * job.gpus,
                              "RuleParameters": "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000"},
        "OverallSystemUsage": {"RuleTriggered": 0, "Violations": 0, "Datapoints": 1200, "RuleParameters": "",
                               "Details": {"CPU": {"algo-1": {"p50": 92, "p95": 97, "max": 100}}}},
        HOSTILE_RULE: {"RuleTriggered": 2, "Violations": 5, "Datapoints": 9,
                       "RuleParameters": {"x<y": '"><script>alert(2)</script>'},
                       "Details": {"</table><script>alert(3)</script>": "<a href='http://evil.example'>x</a>"}},
    }


@pytest.fixture(scope="session")
def cpu_job(tmp_path_factory: pytest.TempPathFactory) -> WrittenJob:
    """CPU-bound, 4 cores, no GPU streams, 15 slow outlier steps, evaluation passes."""
    return write_job(tmp_path_factory.mktemp("cpu-job") / "profiler-output", JobShape(gpus=0))


@pytest.fixture(scope="session")
def gpu_job(tmp_path_factory: pytest.TempPathFactory) -> WrittenJob:
    """The same training with two GPUs waiting on the CPU."""
    return write_job(tmp_path_factory.mktemp("gpu-job") / "profiler-output", JobShape(gpus=2, seed=11))


@pytest.fixture(scope="session")
def fixture_profiler() -> Path:
    return Path(__file__).resolve().parents[2] / "fixtures" / "smdebug-profiler"
