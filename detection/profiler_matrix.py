"""The profiler rules' part of the matrix: every profiler rule on real profiled CPU trainings
(detection.profiled) and on recorded system-metric streams with GPU faults (detection.recorded),
through `sdlocal.evaluator.api.evaluate_trial`, as `sdlocal evaluate` runs them on a finished job."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from detection import profiled, recorded
from detection.matrix import BUDGET, ERROR, FIRED, NO_DATA, SILENT, Cell, Results, RunInfo
from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.status import Status

PROFILER_RULES: tuple[str, ...] = (
    "StepOutlier", "MaxInitializationTime", "Dataloader", "CPUBottleneck", "IOBottleneck", "BatchSize",
    "LowGPUUtilization", "GPUMemoryIncrease", "LoadBalancing", "OverallSystemUsage", "OverallFrameworkMetrics",
    "ProfilerReport",
)
# Rules that never fire (they report figures): judged only on errors.
REPORT_ONLY: tuple[str, ...] = ("OverallSystemUsage", "OverallFrameworkMetrics")
# Parameters given on EVERY profiler run, healthy or not (the matrix footnotes list them):
# the slow-start fault needs a threshold a short run can cross (the default is 20 minutes).
MAX_INIT_THRESHOLD_MIN = "0.1"  # 6 s
PROFILER_PARAMETERS: Mapping[str, Mapping[str, str]] = {
    "MaxInitializationTime": {"threshold": MAX_INIT_THRESHOLD_MIN},
    "ProfilerReport": {"MaxInitializationTime_threshold": MAX_INIT_THRESHOLD_MIN},
}
TRAINING, RECORDED = "profiled", "recorded"


@dataclass(frozen=True)
class ProfilerScenario:
    name: str
    description: str
    kind: str  # TRAINING (a real profiled CPU training) or RECORDED (a written system-metric stream)
    build: Callable[[Any], Any]  # TRAINING: seed -> ProfiledSetup; RECORDED: numpy Generator -> Levels
    seed: int
    targets: tuple[str, ...] = ()
    held_out: bool = False

    @property
    def healthy(self) -> bool:
        return not self.targets


def _targets(*rules: str) -> tuple[str, ...]:
    return (*rules, "ProfilerReport")  # ProfilerReport fires when any of its rules does


PROFILER_SCENARIOS: tuple[ProfilerScenario, ...] = (
    ProfilerScenario("prof_healthy", "MLP, 300 steps, one data-loader worker per core", TRAINING,
                     profiled.healthy, 30),
    ProfilerScenario("prof_slow_steps", "as prof_healthy; every 21st step from step 21 sleeps 10 x the median step",
                     TRAINING, profiled.slow_steps, 31, _targets("StepOutlier")),
    ProfilerScenario("prof_slow_start", "as prof_healthy; 15 s pass before the first step", TRAINING,
                     profiled.slow_start, 32, _targets("MaxInitializationTime")),
    ProfilerScenario("prof_no_workers", "as prof_healthy with num_workers=0", TRAINING, profiled.no_workers, 33,
                     _targets("Dataloader")),
    ProfilerScenario("rec_healthy", "4 GPUs busy (88 %), memory steady, CPU 55 %", RECORDED,
                     recorded.healthy_levels, 40),
    ProfilerScenario("rec_idle_gpu", "as rec_healthy; gpu3 idle (2 %)", RECORDED, recorded.idle_gpu, 41,
                     _targets("LoadBalancing")),
    ProfilerScenario("rec_memory_leak", "as rec_healthy; gpu0 memory +1 point a sample from sample 1,050",
                     RECORDED, recorded.memory_leak, 42, _targets("GPUMemoryIncrease")),
    ProfilerScenario("rec_low_util", "GPUs 25 %, GPU memory 20 %, CPU 20 %", RECORDED,
                     recorded.low_util, 43, _targets("LowGPUUtilization", "BatchSize")),
    ProfilerScenario("rec_cpu_bound", "cores at 95 %, GPUs at 4 %", RECORDED, recorded.cpu_bound, 44,
                     _targets("CPUBottleneck")),
    ProfilerScenario("rec_io_bound", "I/O wait 70 %, GPUs at 4 %", RECORDED, recorded.io_bound, 45,
                     _targets("IOBottleneck")),
)


def held_out_profiler(seeds: Iterable[int]) -> tuple[ProfilerScenario, ...]:
    """The recorded streams drawn again with the first held-out seed (other noise), judged as the
    others. One seed only: a stream costs about 5 s of evaluation, and its seed changes only the noise
    around fixed levels. The real profiled trainings are not repeated: their faults are timing,
    which a seed does not change."""
    seeds = list(seeds)[:1]
    return tuple(replace(s, name=f"{s.name}@{seed}", seed=seed, held_out=True,
                         description=f"{s.name} drawn with held-out seed {seed}")
                 for seed in seeds for s in PROFILER_SCENARIOS if s.kind == RECORDED)


def _produce(scenario: ProfilerScenario, run: Path) -> dict[str, float]:
    if run.exists():
        shutil.rmtree(run)
    if scenario.kind == RECORDED:
        return recorded.record(scenario.build, scenario.seed, run)
    return profiled.train_profiled(scenario.build(scenario.seed), run)


def _expected(rule: str, scenario: ProfilerScenario) -> str | None:
    if rule in REPORT_ONLY:
        return None
    if scenario.healthy:
        return BUDGET if scenario.held_out else "silent"
    return "fire" if rule in scenario.targets else None


def evaluate(rule: str, run: str, trial: Path, expected: str | None) -> Cell:
    """One profiler rule on one finished run; NoIssuesFound with no datapoint in the rule's
    report is NO_DATA (e.g. the GPU rules on a CPU-only training): nothing was judged."""
    params = dict(PROFILER_PARAMETERS.get(rule, {}))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sdlocal-detection-rule-") as out:
        # ProfilerReport without report_output: its verdict is what is judged, and drawing its
        # HTML report would cost seconds a cell
        report_to = None if rule == "ProfilerReport" else out
        status = evaluate_trial(str(trial), rule, params, deadline=120.0, job_name=run, report_output=report_to)
        state = {Status.ISSUES_FOUND: FIRED, Status.NO_ISSUES_FOUND: SILENT}.get(status.status, ERROR)
        report = Path(out) / "profiler-output" / "profiler-reports" / f"{rule}.json"
        if state == SILENT and report_to is not None and report.is_file():
            if not json.loads(report.read_text()).get("Datapoints"):
                state = NO_DATA
    return Cell(rule, run, state, expected, params, status.status_details, round(time.monotonic() - started, 3))


def run_profiler(workdir: Path, results: Results, scenarios: Iterable[ProfilerScenario] = PROFILER_SCENARIOS,
                 log: Callable[[str], None] = lambda _m: None) -> None:
    """Produce every scenario under `workdir/<run>/` and add its runs and cells to `results`."""
    results.profiler_rules = list(PROFILER_RULES)
    for scenario in scenarios:
        run = workdir / scenario.name
        started = time.monotonic()
        figures = _produce(scenario, run)
        seconds = round(time.monotonic() - started, 2)
        log(f"{scenario.kind} {scenario.name} in {seconds:.1f} s: {figures}")
        results.runs.append(RunInfo(scenario.name, scenario.description, scenario.healthy, scenario.targets, seconds,
                                    figures, kind=scenario.kind, held_out=scenario.held_out))
        for rule in PROFILER_RULES:
            cell = evaluate(rule, scenario.name, run, _expected(rule, scenario))
            results.cells.append(cell)
            if cell.wrong:
                log(f"WRONG {rule} on {scenario.name}: {cell.state} (expected {cell.expected}) {cell.details}")
