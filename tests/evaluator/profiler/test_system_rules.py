"""The profiler rules that read system metrics, each firing on a metric stream with a known fault
and silent on its healthy twin. Streams are written with trial.profiler's SystemMetricsWriter (as
the sampler writes them); GPU figures as NVML reports them (this machine has no GPU)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.profiler_rules import (
    BatchSize,
    CPUBottleneck,
    GPUMemoryIncrease,
    IOBottleneck,
    LoadBalancing,
    LowGPUUtilization,
    OverallSystemUsage,
)
from sdlocal.evaluator.profiler_rules.load_balancing import js_distance
from sdlocal.evaluator.rule import Verdict
from tests.evaluator.profiler._streams import JobWriter, finished_trial, judge_all, machine, noisy


def trial_of(tmp_path: Path, n: int, fn, *, interval_s: float = 0.5):  # type: ignore[no-untyped-def]
    JobWriter(tmp_path, interval_s=interval_s).system(n, fn).flush().end()
    return finished_trial(tmp_path)


# ---- CPUBottleneck / IOBottleneck ---------------------------------------------------------------
def test_cpu_bottleneck_fires_when_the_gpu_waits_on_a_busy_core(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    # one core pegged by the data pipeline, the other idle: the mean (50 %) would hide it
    trial = trial_of(tmp_path, 200, lambda i: machine(cpu=[noisy(rng, 96, 2), 4], gpus=[(noisy(rng, 4), 30)]))
    rule = CPUBottleneck(trial, patience="50")
    assert judge_all(rule) is Verdict.CONDITION_MET
    details = rule.report["Details"]["algo-1"]
    assert details["datapoints"] == 200 and details["bottlenecks"] > 180
    assert rule.report["Violations"] == 150  # every instant judged after the first 50
    assert rule.report["RuleTriggered"] == 2  # 100 s of data: two 60-s scan intervals
    assert rule.first_trigger_interval == 0


@pytest.mark.parametrize("cpu,gpu", [([97, 95], 88), ([30, 20], 3)], ids=["gpu-busy", "cpu-idle"])
def test_cpu_bottleneck_silent_when_the_gpu_works_or_the_cpu_idles(tmp_path: Path, cpu: list[float], gpu: float) -> None:
    rule = CPUBottleneck(trial_of(tmp_path, 200, lambda i: machine(cpu=cpu, gpus=[(gpu, 30)])), patience="50")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["RuleTriggered"] == 0 and rule.report["Violations"] == 0


def test_cpu_bottleneck_percentage_counts_the_patience_instants_but_judges_after_them(tmp_path: Path) -> None:
    # 60 healthy instants then 40 bottlenecks: 40 % < 50 % -> silent; 70 more: 110/170 > 50 %
    def fn(i: int):  # type: ignore[no-untyped-def]
        return machine(cpu=[95, 95], gpus=[(90 if i < 60 else 1, 30)])

    rule = CPUBottleneck(trial_of(tmp_path / "a", 100, fn), patience="10")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    rule = CPUBottleneck(trial_of(tmp_path / "b", 170, fn), patience="10")
    assert judge_all(rule) is Verdict.CONDITION_MET
    # instant k (from 0) has k + 1 instants, k - 59 bottlenecks: more than half from k = 120 on
    assert rule.report["Violations"] == 170 - 120
    rule = CPUBottleneck(trial_of(tmp_path / "c", 170, fn), patience="500")  # never past patience
    assert judge_all(rule) is Verdict.NOT_EVALUATED


def test_bottleneck_rules_have_nothing_to_judge_without_gpu_metrics(tmp_path: Path) -> None:
    trial = trial_of(tmp_path, 200, lambda i: machine(cpu=[99, 99], iowait=[90, 90]))
    for cls in (CPUBottleneck, IOBottleneck):
        rule = cls(trial, patience="0")
        assert judge_all(rule) is Verdict.NOT_EVALUATED
        assert rule.report["Datapoints"] == 0 and rule.report["Details"] == {}


def test_io_bottleneck_fires_on_io_wait_and_is_silent_without_it(tmp_path: Path) -> None:
    waiting = trial_of(tmp_path / "w", 100, lambda i: machine(cpu=[10, 10], iowait=[70, 2], gpus=[(3, 20)]))
    rule = IOBottleneck(waiting, patience="20")
    assert judge_all(rule) is Verdict.CONDITION_MET
    assert rule.report["Details"]["algo-1"]["bottleneck_percent"] == 100.0
    assert rule.report["RuleParameters"] == "threshold:50.0\ngpu_threshold:10.0\nio_threshold:50.0\npatience:20"
    calm = trial_of(tmp_path / "c", 100, lambda i: machine(cpu=[10, 10], iowait=[5, 2], gpus=[(3, 20)]))
    assert judge_all(IOBottleneck(calm, patience="20")) is Verdict.CONDITION_NOT_MET


# ---- BatchSize -----------------------------------------------------------------------------------
def test_batch_size_fires_when_cpu_gpu_and_gpu_memory_are_all_lightly_used(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    trial = trial_of(tmp_path, 120, lambda i: machine(cpu=[noisy(rng, 30), noisy(rng, 20)],
                                                       gpus=[(noisy(rng, 40), noisy(rng, 25))]))
    rule = BatchSize(trial, patience="20", window="50")
    assert judge_all(rule) is Verdict.CONDITION_MET
    assert rule.report["Violations"] == 100
    details = rule.report["Details"]["algo-1"]
    assert set(details) == {"cpu", "gpu0", "gpu0_memory"}
    assert 20 < details["cpu"]["p50"] < 30 and 35 < details["gpu0"]["p50"] < 45
    assert set(details["gpu0"]) == {"p25", "p50", "p75", "p95", "upper", "lower", "max", "min"}


@pytest.mark.parametrize("cpu,gpu", [([30, 20], (95, 25)), ([30, 20], (40, 85)), ([90, 80], (40, 25))],
                         ids=["gpu-busy", "gpu-memory-full", "cpu-busy"])
def test_batch_size_silent_when_any_resource_is_used(tmp_path: Path, cpu: list[float], gpu: tuple[float, float]) -> None:
    rule = BatchSize(trial_of(tmp_path, 120, lambda i: machine(cpu=cpu, gpus=[gpu])), patience="20", window="50")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET


def test_batch_size_one_idle_gpu_of_two_is_enough_and_no_gpu_is_not_judged(tmp_path: Path) -> None:
    two = trial_of(tmp_path / "two", 60, lambda i: machine(cpu=[20, 20], gpus=[(95, 80), (10, 10)]))
    assert judge_all(BatchSize(two, patience="0", window="10")) is Verdict.CONDITION_MET
    none = trial_of(tmp_path / "none", 60, lambda i: machine(cpu=[20, 20]))
    rule = BatchSize(none, patience="0", window="10")
    assert judge_all(rule) is Verdict.NOT_EVALUATED and rule.report["Datapoints"] == 0


def test_batch_size_judges_the_trailing_window_not_the_whole_history(tmp_path: Path) -> None:
    # busy for 100 instants, then idle: the last 30-instant window is idle from instant 129 on
    trial = trial_of(tmp_path, 160, lambda i: machine(cpu=[20, 20], gpus=[(95 if i < 100 else 10, 10)]))
    rule = BatchSize(trial, patience="0", window="30")
    assert judge_all(rule) is Verdict.CONDITION_MET
    # the p95 of 30 samples interpolates between the 28th and 29th smallest: it drops below 70 % once
    # at most two busy samples are left in the trailing window, at instant 127
    assert rule.report["Violations"] == 160 - 127


# ---- GPUMemoryIncrease ---------------------------------------------------------------------------
def test_gpu_memory_increase_fires_on_a_jump_and_names_the_gpu(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    trial = trial_of(tmp_path, 80, lambda i: machine(gpus=[(80, noisy(rng, 30, 0.5)),
                                                           (80, noisy(rng, 30 if i < 50 else 45, 0.5))]))
    rule = GPUMemoryIncrease(trial, patience="10", window="10")
    assert judge_all(rule) is Verdict.CONDITION_MET
    details = rule.report["Details"]["algo-1"]
    assert details["gpu1"]["max_increase"] > 10 and details["gpu0"]["max_increase"] < 2


def test_gpu_memory_increase_silent_on_a_flat_and_a_slow_growth(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    flat = trial_of(tmp_path / "flat", 200, lambda i: machine(gpus=[(80, noisy(rng, 40, 1.0))]))
    assert judge_all(GPUMemoryIncrease(flat, patience="10")) is Verdict.CONDITION_NOT_MET
    # 0.2 points per sample: the adjacent 10-sample means differ by 2 < 5 (the documented choice)
    slow = trial_of(tmp_path / "slow", 200, lambda i: machine(gpus=[(80, 10 + 0.2 * i)]))
    rule = GPUMemoryIncrease(slow, patience="10")
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["Details"]["algo-1"]["gpu0"]["max_increase"] == pytest.approx(2.0)
    assert judge_all(GPUMemoryIncrease(finished_trial(tmp_path / "slow"), patience="10", increase="1.5")) \
        is Verdict.CONDITION_MET


# ---- LoadBalancing --------------------------------------------------------------------------------
def test_js_distance() -> None:
    assert js_distance(np.array([1, 0]), np.array([1, 0])) == 0.0
    assert js_distance(np.array([1, 0]), np.array([0, 1])) == pytest.approx(np.sqrt(np.log(2)))
    assert np.isnan(js_distance(np.array([0, 0]), np.array([1, 0])))


def test_load_balancing_compares_every_pair_of_gpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    # gpu0 and gpu1 share the work, gpu2 is starved: only pairs with gpu2 differ
    trial = trial_of(tmp_path, 150, lambda i: machine(gpus=[(noisy(rng, 85), 50), (noisy(rng, 85), 50),
                                                            (noisy(rng, 15), 50)]))
    rule = LoadBalancing(trial)
    assert judge_all(rule) is Verdict.CONDITION_MET
    distances = rule.report["Details"]["distances"]
    assert distances["algo-1/gpu0"]["algo-1/gpu1"] < 0.5
    assert distances["algo-1/gpu0"]["algo-1/gpu2"] > 0.7 and distances["algo-1/gpu1"]["algo-1/gpu2"] > 0.7
    assert rule.report["Violations"] == 150 - 99  # every instant once both GPUs have 100 samples
    workloads = rule.report["Details"]["workloads"]
    assert sorted(workloads) == ["algo-1/gpu0", "algo-1/gpu1", "algo-1/gpu2"] and sum(workloads["algo-1/gpu2"]) == 150
    assert len(rule.report["Details"]["bins"]) == 51


def test_load_balancing_silent_for_balanced_and_single_gpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    balanced = trial_of(tmp_path / "b", 300, lambda i: machine(gpus=[(noisy(rng, 70, 8), 50), (noisy(rng, 70, 8), 50)]))
    rule = LoadBalancing(balanced)
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET and rule.report["Details"]["max_distance"] < 0.5
    # why min_samples: judged from the 11th sample, the same workload's histograms differ by noise alone
    noisy_start = LoadBalancing(finished_trial(tmp_path / "b"), min_samples="0")
    assert judge_all(noisy_start) is Verdict.CONDITION_MET and noisy_start.report["Details"]["max_distance"] > 0.5
    single = trial_of(tmp_path / "s", 80, lambda i: machine(gpus=[(5, 50)]))
    assert judge_all(LoadBalancing(single)) is Verdict.NOT_EVALUATED


def test_load_balancing_counts_a_100_percent_gpu(tmp_path: Path) -> None:
    trial = trial_of(tmp_path, 30, lambda i: machine(gpus=[(100, 50), (0, 50)]))
    rule = LoadBalancing(trial, patience="0", min_samples="1")
    assert judge_all(rule) is Verdict.CONDITION_MET
    assert rule.report["Details"]["workloads"]["algo-1/gpu0"][-1] == 30  # 98-100 %: the last bin


# ---- LowGPUUtilization ----------------------------------------------------------------------------
def test_low_gpu_utilization_underused_and_fluctuating(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    trial = trial_of(tmp_path, 100, lambda i: machine(gpus=[(noisy(rng, 30), 50),  # underused
                                                            (95 if i % 2 else 2, 50),  # swings
                                                            (noisy(rng, 88, 2), 50)]))  # healthy
    rule = LowGPUUtilization(trial, patience="20", window="40")
    assert judge_all(rule) is Verdict.CONDITION_MET
    d = rule.report["Details"]["algo-1"]
    assert (d["gpu0"]["underutilized"], d["gpu0"]["fluctuating"]) == (80, 0)
    assert (d["gpu1"]["underutilized"], d["gpu1"]["fluctuating"]) == (0, 80)
    assert (d["gpu2"]["underutilized"], d["gpu2"]["fluctuating"]) == (0, 0)
    assert rule.report["Violations"] == 160


def test_low_gpu_utilization_silent_when_busy_and_p95_at_the_threshold_is_neither(tmp_path: Path) -> None:
    busy = trial_of(tmp_path / "busy", 100, lambda i: machine(gpus=[(90, 50)]))
    assert judge_all(LowGPUUtilization(busy, patience="20")) is Verdict.CONDITION_NOT_MET
    edge = trial_of(tmp_path / "edge", 100, lambda i: machine(gpus=[(70, 50)]))
    assert judge_all(LowGPUUtilization(edge, patience="20")) is Verdict.CONDITION_NOT_MET


# ---- OverallSystemUsage ---------------------------------------------------------------------------
def test_overall_system_usage_reports_and_never_fires(tmp_path: Path) -> None:
    trial = trial_of(tmp_path, 101, lambda i: machine(cpu=[i, 100 - i], gpus=[(i, 10)], memory=40))
    rule = OverallSystemUsage(trial)
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    d = rule.report["Details"]["algo-1"]
    assert d["cpu"] == {"p50": 50.0, "p95": 50.0, "p99": 50.0, "min": 50.0, "max": 50.0}
    assert d["cpu_busiest_core"]["min"] == 50.0 and d["cpu_busiest_core"]["max"] == 100.0
    assert d["gpu0"] == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "min": 0.0, "max": 100.0}
    assert d["gpu0_memory"]["p50"] == 10.0 and d["memory"]["max"] == 40.0 and d["io_wait"]["max"] == 0.0
    assert rule.report["RuleTriggered"] == 0 and rule.report["Datapoints"] == 101 * 7


# ---- a distributed job: every node's GPUs ---------------------------------------------------------
def test_gpu_rules_judge_every_node_of_a_distributed_job(tmp_path: Path) -> None:
    """Two hosts' samplers (NodeId algo-1, algo-2) write beside each other, as a distributed job's
    hosts do: algo-1's GPUs share the work, algo-2's second GPU is starved."""
    from sdlocal.trial.profiler import SystemMetricsWriter
    from tests.evaluator.profiler._streams import T0_S

    rng = np.random.default_rng(11)
    writers = {node: SystemMetricsWriter(tmp_path, node, close_interval_s=1) for node in ("algo-1", "algo-2")}
    for i in range(150):
        writers["algo-1"].write(machine(gpus=[(noisy(rng, 85), 50), (noisy(rng, 85), 50)]), timestamp=T0_S + i / 2)
        writers["algo-2"].write(machine(gpus=[(noisy(rng, 85), 50), (noisy(rng, 15), 50)]), timestamp=T0_S + i / 2)
    for writer in writers.values():
        writer.close()
        writer.write_end_marker()
    balance = LoadBalancing(finished_trial(tmp_path))
    assert judge_all(balance) is Verdict.CONDITION_MET
    distances = balance.report["Details"]["distances"]
    assert sorted(balance.report["Details"]["workloads"]) == ["algo-1/gpu0", "algo-1/gpu1", "algo-2/gpu0",
                                                              "algo-2/gpu1"]
    assert distances["algo-1/gpu0"]["algo-1/gpu1"] < 0.5 and distances["algo-2/gpu0"]["algo-2/gpu1"] > 0.7
    low = LowGPUUtilization(finished_trial(tmp_path), patience="20", window="40")
    assert judge_all(low) is Verdict.CONDITION_MET
    details = low.report["Details"]
    assert details["algo-2"]["gpu1"]["underutilized"] > 0 and details["algo-2"]["gpu0"]["underutilized"] == 0
    assert all(d["underutilized"] == 0 and d["fluctuating"] == 0 for d in details["algo-1"].values())
