"""The detection-quality matrix: every built-in rule fires on its fault run(s) and no rule fires
on a healthy run (default parameters), through our hook and `evaluate_trial`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from detection import report
from detection.hookconfig import EXPECTED_RULES, XGBOOST_ONLY_RULES, hook_config, hook_request, missing_rules
from detection.matrix import ERROR, FIRED, Results, run_matrix
from detection.run import main
from detection.scenarios import SCENARIOS
from launcher._collections import rule_default_collections

TARGETED = sorted({rule for s in SCENARIOS for rule in s.targets})
HEALTHY = [s.name for s in SCENARIOS if s.healthy]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    return run_matrix(tmp_path_factory.mktemp("detection"))


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
    data = json.loads(js.read_text())
    assert len(data["cells"]) == (len(EXPECTED_RULES) + len(XGBOOST_ONLY_RULES)) * len(SCENARIOS)
    assert sum(1 for c in data["cells"] if c["expected"] == "fire") == sum(len(s.targets) for s in SCENARIOS)


def test_cli_rejects_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--only", "no_such_run"])
    assert exc.value.code == 2
    assert "no_such_run" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_runs_one_scenario_and_exits_by_the_matrix(tmp_path: Path) -> None:
    md, js = tmp_path / "m.md", tmp_path / "r.json"
    code = main(["-q", "--only", "dead_relu", "--markdown", str(md), "--json", str(js)])
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
    main(["-q", "--only", "dead_relu", "--seeds", "1", "--markdown", str(tmp_path / "m.md"), "--json", str(js)])
    runs = {r["name"]: r["judged"] for r in json.loads(js.read_text())["runs"]}
    assert runs == {"dead_relu": True, "healthy_mlp@100": False, "healthy_cnn@100": False, "healthy_text@100": False,
                    "healthy_xgb@100": False}
    assert "## Seed sweep (reported, not judged)" in (tmp_path / "m.md").read_text()
