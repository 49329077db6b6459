"""Run the real-world cases and judge each run with every rule beyond Debugger (at its defaults,
plus the parameters a case's job states), through the evaluator's own `evaluate_trial`."""
from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from detection.realworld.cases import CASES, Case
from sdlocal.evaluator.api import evaluate_trial

RULES = ("ReplicaDivergence", "FrozenParametersChanged", "ParametersNotTraining", "GradientsNotReset",
         "EvaluationMisuse", "RepeatedBatches")


def judge(case: Case, variant: str, trial_dir: Path, rules: Iterable[str] = RULES) -> dict[str, str]:
    """Each rule's final status on one run (IssuesFound / NoIssuesFound / Error: details)."""
    out = {}
    for rule in rules:
        status = evaluate_trial(str(trial_dir), rule, case.params.get(rule, {}), interval=0.0)
        value = status.status.value if hasattr(status.status, "value") else str(status.status)
        out[rule] = value if value != "Error" else f"Error: {status.status_details}"
    return out


def run_case(case: Case, variant: str, root: Path, rules: Iterable[str] = RULES) -> dict[str, Any]:
    trial_dir = root / f"{case.name}-{variant}"
    start = time.monotonic()
    case.run(trial_dir, variant)
    train_s = time.monotonic() - start
    verdicts = judge(case, variant, trial_dir, rules)
    return {"case": case.name, "variant": variant, "rule": case.rule, "verdicts": verdicts,
            "train_s": round(train_s, 2), "judge_s": round(time.monotonic() - start - train_s, 2)}


def run_all(cases: Iterable[Case] = CASES) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="sdlocal-realworld-") as tmp:
        return [run_case(case, variant, Path(tmp)) for case in cases for variant in case.variants]


def fired(result: dict[str, Any], rule: str) -> bool:
    return result["verdicts"].get(rule) == "IssuesFound"


def summary(results: list[dict[str, Any]], rules: Iterable[str] = RULES) -> dict[str, Any]:
    """Per rule and for the set: bugs caught (firing on the buggy run and not on its fix), the
    bugs caught by the case's own rule, false alarms on fixed and healthy runs."""
    by = {(r["case"], r["variant"]): r for r in results}
    cases = sorted({r["case"] for r in results if r["variant"] == "buggy"}, key=[c.name for c in CASES].index)
    clean = [r for r in results if r["variant"] != "buggy"]
    rules = list(rules)
    per_rule = {}
    for rule in rules:
        caught = [c for c in cases if fired(by[(c, "buggy")], rule) and not fired(by[(c, "fixed")], rule)]
        per_rule[rule] = {"caught": caught, "false_alarms": [f"{r['case']}/{r['variant']}" for r in clean if fired(r, rule)]}
    own = [c for c in cases if by[(c, "buggy")]["rule"] in per_rule and c in per_rule[by[(c, "buggy")]["rule"]]["caught"]]
    any_caught = [c for c in cases if any(c in per_rule[r]["caught"] for r in rules)]
    alarms = [f"{r['case']}/{r['variant']}" for r in clean if any(fired(r, rule) for rule in rules)]
    return {"cases": cases, "per_rule": per_rule, "own_reason": own, "caught": any_caught,
            "false_alarms": alarms, "clean_runs": len(clean)}


def write_json(results: list[dict[str, Any]], path: Path) -> None:
    path.write_text(json.dumps({"results": results, "summary": summary(results)}, indent=1) + "\n")
