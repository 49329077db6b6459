"""The detection-quality matrix: every built-in rule fires on its fault run(s) and no rule fires
on a healthy run (default parameters), through our hook and `evaluate_trial`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from detection import report
from detection.hookconfig import EXPECTED_RULES, XGBOOST_ONLY_RULES, hook_config, hook_request, missing_rules
from detection.matrix import BUDGET, ERROR, FIRED, NO_DATA, SILENT, Results, allowed_false_alarms
from detection.profiler_matrix import PROFILER_RULES, PROFILER_SCENARIOS, REPORT_ONLY, held_out_profiler
from detection.run import main, run_all
from detection.scenarios import HELD_OUT_SEEDS, LIVE, SCENARIOS, held_out
from sdlocal.launcher.spec.collection_configs import rule_default_collections

TARGETED = sorted({rule for s in SCENARIOS for rule in s.targets})
HEALTHY = [s.name for s in SCENARIOS if s.healthy]
HELD_OUT = held_out(HELD_OUT_SEEDS)
HELD_OUT_PROFILER = held_out_profiler(HELD_OUT_SEEDS)
PROFILER_TARGETED = sorted({rule for s in PROFILER_SCENARIOS for rule in s.targets})
PROFILER_HEALTHY = [s.name for s in PROFILER_SCENARIOS if s.healthy]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """The whole matrix as `python -m detection` produces it (held-out seeds included)."""
    return run_all(tmp_path_factory.mktemp("detection"), [*SCENARIOS, *HELD_OUT],
                   [*PROFILER_SCENARIOS, *HELD_OUT_PROFILER])


def test_every_rule_has_a_fault_scenario_and_three_healthy_runs() -> None:
    xgb_targets = {rule for s in SCENARIOS if s.framework == "xgboost" for rule in s.targets}
    assert sorted({*EXPECTED_RULES, *XGBOOST_ONLY_RULES}) == TARGETED
    assert set(XGBOOST_ONLY_RULES) <= xgb_targets  # plus universal rules on XGBoost data
    assert {"ClassImbalance", "Overfit"} <= xgb_targets
    assert len(HEALTHY) >= 4 and "healthy_xgb" in HEALTHY


def test_hook_config_has_every_rule_default_collection(tmp_path: Path) -> None:
    request = hook_request()
    names = {c["CollectionName"] for c in request["CollectionConfigurations"]}
    for rule in EXPECTED_RULES:
        assert {c.name for c in rule_default_collections(rule)} <= names, rule
    # the short HookParameters schedule replaces the rules' save_interval=500, as under `sdlocal run`
    assert all("save_interval" not in c.get("CollectionParameters", {}) for c in request["CollectionConfigurations"])
    config = hook_config(tmp_path)
    assert {c.name for c in config.collections_to_save()} >= names


def test_all_rules_present() -> None:
    assert missing_rules() == [], "built-in rules not implemented yet"


@pytest.mark.slow
@pytest.mark.parametrize("rule", EXPECTED_RULES)
def test_rule_fires_on_its_fault(results: Results, rule: str) -> None:
    if rule in results.missing:
        pytest.fail(f"{rule} is missing")
    runs = [s.name for s in SCENARIOS if rule in s.targets]
    for run in runs:
        cell = results.cell(rule, run)
        assert cell.state == FIRED, f"{rule} on {run}: {cell.state} {cell.details}"


@pytest.mark.slow
@pytest.mark.parametrize("rule", EXPECTED_RULES)
def test_rule_silent_on_healthy_runs(results: Results, rule: str) -> None:
    if rule in results.missing:
        pytest.fail(f"{rule} is missing")
    fired = {run: results.cell(rule, run).details for run in HEALTHY if results.cell(rule, run).state == FIRED}
    assert not fired, f"{rule} fired on healthy runs: {fired}"


@pytest.mark.slow
def test_no_cell_is_an_error(results: Results) -> None:
    errors = [(c.rule, c.run, c.details) for c in results.cells if c.state == ERROR]
    assert not errors


@pytest.mark.slow
def test_report_shows_every_rule_and_run(results: Results, tmp_path: Path) -> None:
    md, js = tmp_path / "m.md", tmp_path / "r.json"
    report.write(results, md, js)
    text = md.read_text()
    for rule in (*EXPECTED_RULES, *XGBOOST_ONLY_RULES):
        assert f"| {rule} |" in text
    for s in SCENARIOS:
        assert s.name in text
    for s in PROFILER_SCENARIOS:
        assert s.name in text
    assert "## Profiler rules" in text and "## Held-out seeds (judged)" in text
    data = json.loads(js.read_text())
    tensor_cells = (len(EXPECTED_RULES) + len(XGBOOST_ONLY_RULES)) * (len(SCENARIOS) + len(HELD_OUT))
    assert len(data["cells"]) == tensor_cells + len(PROFILER_RULES) * (len(PROFILER_SCENARIOS) + len(HELD_OUT_PROFILER))
    assert sum(1 for c in data["cells"] if c["expected"] == "fire") == sum(
        len(s.targets) for s in (*SCENARIOS, *HELD_OUT, *PROFILER_SCENARIOS, *HELD_OUT_PROFILER))


def test_cli_rejects_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--only", "no_such_run"])
    assert exc.value.code == 2
    assert "no_such_run" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_runs_one_scenario_and_exits_by_the_matrix(tmp_path: Path) -> None:
    md, js = tmp_path / "m.md", tmp_path / "r.json"
    code = main(["-q", "--only", "dead_relu", "--no-held-out", "--markdown", str(md), "--json", str(js)])
    data = json.loads(js.read_text())
    wrong = [c for c in data["cells"] if c["state"] == ERROR
             or (c["expected"] == "fire" and c["state"] != FIRED)]
    assert code == (1 if wrong else (2 if data["missing_rules"] else 0))
    assert [r["name"] for r in data["runs"]] == ["dead_relu"]
    assert "dead_relu" in md.read_text()


def test_report_footnotes_name_only_the_runs_that_ran() -> None:
    from detection.matrix import Cell, RunInfo

    results = Results(rules=["DeadRelu"], missing=[],
                      runs=[RunInfo("dead_relu", "biases of -20", False, ("DeadRelu",), 1.0,
                                    {"first_loss": 1.0, "last_loss": 1.0, "val_loss": 1.0})],
                      cells=[Cell("DeadRelu", "dead_relu", FIRED, "fire")])
    text = report.markdown(results)
    assert "| DeadRelu | **FIRES** ✓ |" in text
    assert "stalled" not in text and "changed_seed" not in text


def test_seed_sweep_runs_are_reported_not_judged() -> None:
    from detection.matrix import Cell, RunInfo
    from detection.scenarios import seed_sweep

    sweep = seed_sweep([7])
    assert [s.name for s in sweep] == ["healthy_mlp@7", "healthy_cnn@7", "healthy_text@7", "healthy_xgb@7"]
    assert all(s.healthy and not s.judged for s in sweep)
    losses = {"first_loss": 1.0, "last_loss": 0.1, "val_loss": 0.1}
    results = Results(rules=["Overfit"], missing=[],
                      runs=[RunInfo("healthy_mlp", "MLP", True, (), 1.0, losses),
                            RunInfo("healthy_mlp@7", "MLP, seed 7", True, (), 1.0, losses, judged=False)],
                      cells=[Cell("Overfit", "healthy_mlp", "silent", "silent"),
                             Cell("Overfit", "healthy_mlp@7", FIRED, None, details="RuleEvaluationConditionMet: at step 9")])
    assert results.wrong() == []  # a sweep run firing is not a wrong cell
    text = report.markdown(results)
    assert "| rule | healthy_mlp (healthy) |" in text  # the judged matrix leaves the sweep run out
    assert "| healthy_mlp@7 | Overfit (fired: at step 9) |" in text
    assert "1 of 1 seed-sweep cells fired or errored." in text
    assert "By rule: Overfit 1 of 1 runs; every other rule stayed silent on all 1." in text


@pytest.mark.slow
def test_cli_seed_sweep_trains_the_healthy_runs_with_other_seeds(tmp_path: Path) -> None:
    js = tmp_path / "r.json"
    main(["-q", "--only", "dead_relu", "--no-held-out", "--seeds", "1", "--markdown", str(tmp_path / "m.md"),
          "--json", str(js)])
    runs = {r["name"]: r["judged"] for r in json.loads(js.read_text())["runs"]}
    assert runs == {"dead_relu": True, "healthy_mlp@100": False, "healthy_cnn@100": False, "healthy_text@100": False,
                    "healthy_xgb@100": False}
    assert "## Seed sweep (reported, not judged)" in (tmp_path / "m.md").read_text()


# ---------------------------------------------------------------------- profiler rules


def test_every_profiler_rule_has_a_fault_or_reports_only() -> None:
    judged = set(PROFILER_RULES) - set(REPORT_ONLY)
    assert judged == set(PROFILER_TARGETED)
    kinds = {s.kind for s in PROFILER_SCENARIOS if s.healthy}
    assert kinds == {"profiled", "recorded"}  # a healthy twin of each kind


@pytest.mark.slow
@pytest.mark.parametrize("rule", PROFILER_TARGETED)
def test_profiler_rule_fires_on_its_fault(results: Results, rule: str) -> None:
    for s in PROFILER_SCENARIOS:
        if rule in s.targets:
            cell = results.cell(rule, s.name)
            assert cell.state == FIRED, f"{rule} on {s.name}: {cell.state} {cell.details}"


@pytest.mark.slow
@pytest.mark.parametrize("rule", PROFILER_RULES)
def test_profiler_rule_silent_on_healthy_twins(results: Results, rule: str) -> None:
    fired = {run: results.cell(rule, run).details for run in PROFILER_HEALTHY
             if results.cell(rule, run).state in (FIRED, ERROR)}
    assert not fired, f"{rule} fired on healthy twins: {fired}"


@pytest.mark.slow
def test_profiled_runs_judge_the_framework_rules_with_data(results: Results) -> None:
    # the healthy twin's silence on StepOutlier, MaxInitializationTime and Dataloader is a judgement
    # (data read), not the absence of data
    for rule in ("StepOutlier", "MaxInitializationTime", "Dataloader"):
        assert results.cell(rule, "prof_healthy").state == SILENT
    for rule in ("CPUBottleneck", "LowGPUUtilization", "BatchSize", "GPUMemoryIncrease", "LoadBalancing"):
        assert results.cell(rule, "rec_healthy").state == SILENT


# ---------------------------------------------------------------------- live StalledTrainingRule


@pytest.mark.slow
def test_stalled_training_rule_is_evaluated_live_on_healthy_runs(results: Results) -> None:
    live = [s.name for s in (*SCENARIOS, *HELD_OUT) if "StalledTrainingRule" in s.follow]
    assert set(live) >= {s.name for s in SCENARIOS if s.healthy and s.framework == "pytorch"} | {"stalled"}
    assert LIVE == ("StalledTrainingRule",)
    cells = [results.cell("StalledTrainingRule", run) for run in live]
    assert all(c.live for c in cells)
    assert len({c.parameters["threshold"] for c in cells}) == 1  # the same threshold everywhere
    stalled = [c for c in cells if c.run.split("@")[0] == "stalled"]
    assert stalled and all(c.state == FIRED for c in stalled)  # evaluated the same way, a stall fires


# ---------------------------------------------------------------------- held-out seeds


@pytest.mark.slow
def test_fault_runs_with_held_out_seeds_fire_their_targets(results: Results) -> None:
    silent = [(rule, s.name, results.cell(rule, s.name).state) for s in (*HELD_OUT, *HELD_OUT_PROFILER)
              for rule in s.targets if results.cell(rule, s.name).state != FIRED]
    assert not silent


# Measured over the budget on the held-out seeds and reported as such in the matrix, not retuned:
# at its documented defaults Overfit fires on healthy runs whose training loss nears 0 (2 of the 8
# held-out healthy runs; 6 of 24 in the old seed sweep; README: `patience=3` silences it). Strict:
# this test fails as soon as Overfit is within the budget, so the mark cannot outlive the fact.
OVER_BUDGET = {"Overfit": "Overfit at its defaults: 2 of 8 held-out healthy runs (budget 1); see the matrix"}


@pytest.mark.slow
@pytest.mark.parametrize("rule", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=OVER_BUDGET[r])) if r in OVER_BUDGET else r
    for r in (*EXPECTED_RULES, *XGBOOST_ONLY_RULES, *PROFILER_RULES)])
def test_false_alarms_within_budget(results: Results, rule: str) -> None:
    fired, judged = results.false_alarms().get(rule, (0, 0))
    runs = [c.run for c in results.cells if c.rule == rule and c.expected == BUDGET and c.state == FIRED]
    assert fired <= allowed_false_alarms(judged), (
        f"{rule} fired on {fired} of {judged} held-out healthy runs ({runs}); budget: {allowed_false_alarms(judged)}")


def test_budget_judges_held_out_healthy_cells_only() -> None:
    from detection.matrix import FALSE_ALARM_BUDGET, Cell

    cells = [Cell("Overfit", f"healthy_mlp@{i}", FIRED if i < 2 else SILENT, BUDGET) for i in range(10)]
    cells += [Cell("Overfit", "random_labels@1", FIRED, None), Cell("DeadRelu", "healthy_mlp@1", SILENT, BUDGET),
              Cell("LoadBalancing", "prof_healthy@1", NO_DATA, BUDGET)]  # no data: not a judgement
    results = Results(rules=["Overfit", "DeadRelu"], missing=[], cells=cells)
    assert FALSE_ALARM_BUDGET == 0.2 and allowed_false_alarms(10) == 2 and allowed_false_alarms(4) == 0
    assert results.false_alarms() == {"Overfit": (2, 10), "DeadRelu": (0, 1)}
    assert results.over_budget() == {} and results.wrong() == []
    results.cells.append(Cell("Overfit", "healthy_cnn@1", FIRED, BUDGET))
    assert results.over_budget() == {"Overfit": (3, 11)}


def test_held_out_scenarios_use_seeds_never_tuned_on() -> None:
    tuned = {s.seed for s in (*SCENARIOS, *PROFILER_SCENARIOS) if s.seed is not None} | set(range(0, 46)) | set(
        range(100, 108))
    assert not set(HELD_OUT_SEEDS) & tuned
    names = {s.name for s in HELD_OUT}
    assert all(s.held_out and s.seed not in tuned for s in HELD_OUT)
    assert {s.compare_with for s in HELD_OUT if s.compare_with} <= names  # partners are held-out runs too


def test_recorded_streams_are_sagemaker_system_metric_files(tmp_path: Path) -> None:
    import re

    from detection import recorded
    from sdlocal.trial.profiler import ProfilerReader

    recorded.record(recorded.memory_leak, 1, tmp_path)
    files = sorted((tmp_path / "profiler-output" / "system" / "incremental").rglob("*.json"))
    assert [f.name for f in files][:2] == ["1767225600.algo-1.json", "1767225660.algo-1.json"]  # one a minute
    first = files[0].read_text().splitlines()[0]
    assert re.fullmatch(r'\{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":[0-9.]+,'
                        r'"NodeId":"algo-1","Timestamp":1767225600(\.0)?\}', first), first
    reader = ProfilerReader(str(tmp_path / "profiler-output"))
    reader.refresh()
    assert reader.training_ended()
    gpus = reader.system.keys(type="gpu", dimension="GPUMemoryUtilization")
    assert len(gpus) == 4
    leak = reader.system.series(gpus[0], None, None).values
    assert leak.size == recorded.INSTANTS and leak[:recorded.LEAK_START].max() < 65 and leak[-1] == 95
