"""The profiler rules that read the framework trace (step and data-loading events as the hook
records them, written with trial.profiler's TraceWriter), each firing and silent."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.profiler_rules import (
    Dataloader,
    MaxInitializationTime,
    OverallFrameworkMetrics,
    StepOutlier,
)
from sdlocal.evaluator.profiler_rules.dataloader import median_of
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.profiler.names import (
    BACKWARD_PHASE,
    DATALOADER_INITIALIZE,
    DATALOADER_ITER,
    DATALOADER_WORKER,
    FORWARD_PHASE,
)
from tests.evaluator.profiler._streams import T0_US, JobWriter, finished_trial, judge_all, machine

ITER = "_MultiProcessingDataLoaderIter::GetNext"


def steady(n: int, seconds: float = 0.1, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(np.clip(rng.normal(seconds, seconds / 20, n), seconds / 2, None))


# ---- StepOutlier ---------------------------------------------------------------------------------
def test_step_outlier_fires_on_more_than_n_outliers_and_lists_them(tmp_path: Path) -> None:
    durations = steady(150)
    for i in (20, 40, 60, 80, 100, 110, 120, 130, 140, 145, 148):  # 11 slow steps
        durations[i] = 1.0
    JobWriter(tmp_path).steps(durations).end()
    rule = StepOutlier(finished_trial(tmp_path))
    assert judge_all(rule) is Verdict.CONDITION_MET
    train = rule.report["Details"]["step_details"]["TRAIN"]
    assert train["number_of_outliers"] == 11 and train["outlier_steps"] == [20, 40, 60, 80, 100, 110, 120, 130, 140, 145, 148]
    assert train["steps"] == 150 and train["step_stats"]["max"] == 1.0 and len(train["probs"]) == 100
    assert rule.report["Violations"] == 11 and rule.report["Datapoints"] == 150


def test_step_outlier_silent_with_few_outliers_or_before_100_steps(tmp_path: Path) -> None:
    durations = steady(150)
    for i in range(10):  # exactly n_outliers: not more
        durations[10 + i * 10] = 1.0
    JobWriter(tmp_path / "ten").steps(durations).end()
    assert judge_all(StepOutlier(finished_trial(tmp_path / "ten"))) is Verdict.CONDITION_NOT_MET
    assert judge_all(StepOutlier(finished_trial(tmp_path / "ten"), n_outliers="9")) is Verdict.CONDITION_MET
    JobWriter(tmp_path / "short").steps(steady(100)[:89] + [1.0] * 11).end()  # 100 steps: not after 100
    rule = StepOutlier(finished_trial(tmp_path / "short"), n_outliers="0")
    assert judge_all(rule) is Verdict.NOT_EVALUATED and rule.report["Details"]["step_details"] == {}


def test_step_outlier_judges_each_mode_on_its_own(tmp_path: Path) -> None:
    # EVAL steps are 10 times longer than TRAIN steps but steady: mixed, they would all be outliers
    job = JobWriter(tmp_path)
    for block in range(5):
        job.steps(steady(40, 0.1, seed=block), first_step=block * 40, flush=False)
        job.steps(steady(25, 1.0, seed=10 + block), mode="EVAL", first_step=block * 25, flush=False)
    job.flush().end()
    rule = StepOutlier(finished_trial(tmp_path), stddev="2", n_outliers="20")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert set(rule.report["Details"]["step_details"]) == {"TRAIN", "EVAL"}
    only_eval = StepOutlier(finished_trial(tmp_path), mode="EVAL")
    judge_all(only_eval)
    assert set(only_eval.report["Details"]["step_details"]) == {"EVAL"}
    assert only_eval.report["RuleParameters"] == "stddev:3.0\nmode:EVAL\nn_outliers:10"


# ---- Dataloader ----------------------------------------------------------------------------------
def loader_job(root: Path, num_workers: int | None, batches: int = 50, cores: int = 4,
               workers_alive: int = 0) -> JobWriter:
    job = JobWriter(root).system(10, lambda i: machine(cpu=[10.0] * cores))
    args = {"num_workers": num_workers, "pin_memory": True} if num_workers is not None else None
    job.event(DATALOADER_INITIALIZE, "_MultiProcessingDataLoaderIter.__init__", 0.05, args)
    for w in range(workers_alive):  # one event per worker process, for the whole epoch
        job.event(DATALOADER_WORKER, "_MultiProcessingDataLoaderIter.worker", batches * 0.1 + 1,
                  {"worker_id": w, "pid": 4000 + w}, advance=False)
    for i in range(batches):
        job.event(DATALOADER_ITER, ITER, 0.02, args)
        job.steps([0.08], first_step=i, flush=False)
    return job.flush().end()


@pytest.mark.parametrize("workers,fires", [(0, True), (2, True), (3, False), (8, False), (9, True)])
def test_dataloader_against_the_cores(tmp_path: Path, workers: int, fires: bool) -> None:
    # 4 cores: at least 70 % (2.8) and at most 200 % (8) of them
    loader_job(tmp_path, workers)
    rule = Dataloader(finished_trial(tmp_path))
    assert judge_all(rule) is (Verdict.CONDITION_MET if fires else Verdict.CONDITION_NOT_MET)
    details = rule.report["Details"]
    assert (details["cores"], details["dataloaders"], details["num_workers"]) == (4, workers, {str(workers): 50})
    assert details["pin_memory"] is True and details["dataloading_time"]["p50"] == pytest.approx(0.02)
    assert rule.report["Violations"] == (50 if fires else 0)


def test_dataloader_counts_worker_processes_when_batches_carry_no_num_workers(tmp_path: Path) -> None:
    loader_job(tmp_path, None, workers_alive=3)
    rule = Dataloader(finished_trial(tmp_path))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET and rule.report["Details"]["dataloaders"] == 3
    loader_job(tmp_path / "none", None, workers_alive=0)
    assert judge_all(Dataloader(finished_trial(tmp_path / "none"))) is Verdict.CONDITION_MET


def test_dataloader_median_follows_the_loader_serving_most_batches(tmp_path: Path) -> None:
    job = JobWriter(tmp_path).system(10, lambda i: machine(cpu=[10.0] * 4))
    for i in range(60):  # a training loader (4 workers) and an eval loader (0) every 4th batch
        job.event(DATALOADER_ITER, ITER, 0.02, {"num_workers": 0 if i % 4 == 3 else 4})
    job.flush().end()
    rule = Dataloader(finished_trial(tmp_path))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["Details"]["num_workers"] == {"0": 15, "4": 45}
    assert median_of({0: 1, 4: 1}) == 2.0 and median_of({1: 2, 5: 1}) == 1


def test_dataloader_without_events_or_cores(tmp_path: Path) -> None:
    JobWriter(tmp_path / "none").system(10, lambda i: machine()).steps([0.1] * 20).end()
    assert judge_all(Dataloader(finished_trial(tmp_path / "none"))) is Verdict.NOT_EVALUATED
    job = JobWriter(tmp_path / "nosys")
    job.event(DATALOADER_ITER, ITER, 0.02, {"num_workers": 0}).flush().end()
    rule = Dataloader(finished_trial(tmp_path / "nosys"))
    assert judge_all(rule) is Verdict.NOT_EVALUATED  # counted, not judged: no core count
    assert rule.report["Details"]["cores"] == 0 and rule.report["Details"]["num_workers"] == {"0": 1}


# ---- MaxInitializationTime -----------------------------------------------------------------------
def init_job(root: Path, first_step_s: float | None, *, run_s: float = 60) -> None:
    job = JobWriter(root).system(int(run_s * 2), lambda i: machine())
    job.event(DATALOADER_INITIALIZE, "_SingleProcessDataLoaderIter.__init__", 0.5, {"num_workers": 0})
    if first_step_s is not None:
        job.skip(first_step_s - 0.5).steps([0.1] * 20, flush=False)
    job.flush().end()


def test_max_initialization_time_fires_on_a_slow_start(tmp_path: Path) -> None:
    init_job(tmp_path, 30.0)
    rule = MaxInitializationTime(finished_trial(tmp_path), threshold="0.25")  # 15 s
    assert judge_all(rule) is Verdict.CONDITION_MET
    details = rule.report["Details"]
    assert details["initialization_s"] == 30.0 and details["first_step"] == T0_US + 30_000_000
    assert rule.first_trigger_us == T0_US + 30_000_000 and rule.report["Violations"] == 1
    assert judge_all(MaxInitializationTime(finished_trial(tmp_path))) is Verdict.CONDITION_NOT_MET  # 20 min


def test_max_initialization_time_silent_on_a_quick_start(tmp_path: Path) -> None:
    init_job(tmp_path, 3.0)
    rule = MaxInitializationTime(finished_trial(tmp_path), threshold="0.25")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["Details"]["step_num"] == {"first": T0_US + 3_000_000, "last": T0_US + 4_900_000}


def test_max_initialization_time_without_steps(tmp_path: Path) -> None:
    init_job(tmp_path / "never", None)  # framework data, no step in 60 s
    assert judge_all(MaxInitializationTime(finished_trial(tmp_path / "never"), threshold="0.5")) is Verdict.CONDITION_MET
    JobWriter(tmp_path / "nofw").system(120, lambda i: machine()).end()  # no framework metrics at all
    rule = MaxInitializationTime(finished_trial(tmp_path / "nofw"), threshold="0.25")
    assert judge_all(rule) is Verdict.NOT_EVALUATED
    assert rule.report["Details"]["message"].startswith("no framework metrics")


# ---- OverallFrameworkMetrics ---------------------------------------------------------------------
def test_overall_framework_metrics_splits_the_time(tmp_path: Path) -> None:
    job = JobWriter(tmp_path)
    for i in range(10):  # 1 s per iteration: 0.2 s loading, 0.3 forward, 0.4 backward, 0.1 else
        job.event(DATALOADER_ITER, ITER, 0.2, {"num_workers": 0})
        start = job.trace_t_us
        job.event(FORWARD_PHASE, "Net", 0.3).event(BACKWARD_PHASE, "Net", 0.4)
        job.trace_writer.record_step("TRAIN", i, start, job.trace_t_us)
        job.skip(0.1)
    job.steps([0.5], mode="EVAL", flush=False).flush().end()
    rule = OverallFrameworkMetrics(finished_trial(tmp_path))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    d = rule.report["Details"]
    assert d["training_time_s"] == pytest.approx(10.5)  # 10 iterations, then the EVAL step
    assert d["steps"] == {"TRAIN": 10, "EVAL": 1}
    assert d["step_time_s"] == {"TRAIN": pytest.approx(7.0), "EVAL": pytest.approx(0.5)}
    assert d["in_steps_s"] == pytest.approx(7.5) and d["outside_steps_s"] == pytest.approx(3.0)
    assert d["split_s"] == {"forward": pytest.approx(3.0), "backward": pytest.approx(4.0),
                            "dataloading": pytest.approx(2.0), "other": pytest.approx(1.5)}
    assert sum(d["split_percent"].values()) == pytest.approx(100.0)
    assert d["top_events"][0] == {"name": "Step:ModeKeys.TRAIN", "phase": "Step:ModeKeys.TRAIN",
                                  "total_s": pytest.approx(7.0), "count": 10}
    assert rule.report["RuleTriggered"] == 0 and rule.report["Datapoints"] == 41  # events
