"""No verdict without data (evaluator/unjudged.py): a rule whose tensors were never saved ends Error
naming what it never saw, not NoIssuesFound; a rule that judged what it had keeps its verdict.
Real local trials, the real loop (`evaluate`, assume_ended as `sdlocal evaluate` on a folder)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.registry import builtin_rule_infos, get_rule_class, instantiate_rule
from sdlocal.evaluator.rule import Rule, RuleKind
from sdlocal.evaluator.status import Status
from sdlocal.trial import create_trial
from tests.evaluator._trials import losses, train_steps, write_steps

WEIGHTS = [{"Net_fc1.weight": np.full(3, float(i), np.float32),
            "gradient/Net_fc1.weight": np.full(3, 0.1 * (i + 1), np.float32)} for i in range(12)]


def judge(root: Path, rule: str, **params: str) -> Any:
    trial = create_trial(str(root))
    return evaluate(trial, instantiate_rule(get_rule_class(rule), trial, params), assume_ended=True, sleep=lambda s: None)


def test_loss_rule_over_a_trial_whose_losses_got_no_tensor_ends_error_naming_it(tmp_path: Path) -> None:
    # the Hugging Face Trainer's case: steps of weights and gradients, a `losses` collection, no loss
    root = write_steps(tmp_path, train_steps(WEIGHTS))
    final = judge(root, "LossNotDecreasing")
    assert final.status is Status.ERROR
    assert final.status_details.startswith(
        "ClientError: Rule LossNotDecreasing judged nothing: no tensor of collection 'losses' was saved: "
        "the trial has 12 steps with tensors of gradients, weights"), final.status_details
    assert "hook.register_loss" in final.status_details  # how a loss the hook does not see gets saved


def test_the_same_rule_with_its_losses_judges_them(tmp_path: Path) -> None:
    steps = [(s, m, ms, {**WEIGHTS[s], **t}) for (s, m, ms, t) in losses([1.0] * 12)]
    assert judge(write_steps(tmp_path / "flat", steps), "LossNotDecreasing").status is Status.ISSUES_FOUND
    falling = [(s, m, ms, {**WEIGHTS[s], **t}) for (s, m, ms, t) in losses([1.0 / (i + 1) for i in range(12)])]
    assert judge(write_steps(tmp_path / "falling", falling), "LossNotDecreasing").status is Status.NO_ISSUES_FOUND


def test_a_regex_that_matches_nothing_and_a_trial_without_steps_are_named(tmp_path: Path) -> None:
    root = write_steps(tmp_path / "a", train_steps(WEIGHTS))
    final = judge(root, "LossNotDecreasing", use_losses_collection="False", tensor_regex="val_loss")
    assert final.status is Status.ERROR and "no saved tensor matches 'val_loss'" in final.status_details
    empty = write_steps(tmp_path / "b", [])
    final = judge(empty, "VanishingGradient")
    assert final.status is Status.ERROR
    assert "no tensor of collection 'gradients' was saved: the trial has no step" in final.status_details


def test_a_requested_collection_the_hook_never_had_is_named_with_what_was_saved(tmp_path: Path) -> None:
    final = judge(write_steps(tmp_path, train_steps(WEIGHTS)), "ExplodingTensor", collection_names="gradeints")
    assert final.status is Status.ERROR
    assert "no tensor of collection 'gradeints' was saved" in final.status_details
    assert "its collections: biases, gradients, losses, weights" in final.status_details


def test_a_rule_that_judged_what_it_had_keeps_its_verdict(tmp_path: Path) -> None:
    # ExplodingTensor over every tensor: weights and gradients were there, NaN-free
    assert judge(write_steps(tmp_path, train_steps(WEIGHTS)), "ExplodingTensor").status is Status.NO_ISSUES_FOUND
    # two collections, one of them empty, steps judged: the verdict stands
    final = judge(write_steps(tmp_path / "b", train_steps(WEIGHTS)), "ExplodingTensor",
                  collection_names="gradients,losses")
    assert final.status is Status.NO_ISSUES_FOUND


class ReadsLoss(Rule):
    """A custom rule in smdebug's style: reads a tensor by name; missing data skips the step."""

    def invoke_at_step(self, step: int) -> bool:
        return bool(self.base_trial.tensor("CrossEntropyLoss_output_0").value(step) > 10)


class ReadsNothing(Rule):
    def invoke_at_step(self, step: int) -> bool:
        return False


def test_custom_rule_that_got_its_tensor_at_no_step_ends_error(tmp_path: Path) -> None:
    trial = create_trial(str(write_steps(tmp_path, train_steps(WEIGHTS))))
    final = evaluate(trial, ReadsLoss(trial), assume_ended=True, sleep=lambda s: None)
    assert final.status is Status.ERROR
    assert "Rule ReadsLoss judged nothing: none of the 12 steps had the tensors it reads" in final.status_details
    # a custom rule that judged its steps (reading nothing) is left as it is
    final = evaluate(trial, ReadsNothing(trial), assume_ended=True, sleep=lambda s: None)
    assert final.status is Status.NO_ISSUES_FOUND
    # and one that got its tensor at some steps judged those
    steps = [(s, m, ms, {**WEIGHTS[s], **t}) for (s, m, ms, t) in losses([1.0] * 6)]
    other = create_trial(str(write_steps(tmp_path / "b", steps)))
    assert evaluate(other, ReadsLoss(other), assume_ended=True, sleep=lambda s: None).status is Status.NO_ISSUES_FOUND


TENSOR_RULES = [i.name for i in builtin_rule_infos() if get_rule_class(i.name).kind == RuleKind.DEBUGGER]


@pytest.mark.parametrize("name", TENSOR_RULES)
def test_every_built_in_rule_over_a_trial_without_its_tensors_ends_error_or_reads_none(tmp_path: Path,
                                                                                       name: str) -> None:
    empty = write_steps(tmp_path / "empty", [])  # the collections file, no step: a hook that saved nothing
    other = create_trial(str(write_steps(tmp_path / "other", train_steps(WEIGHTS[:3]))))
    trial = create_trial(str(empty))
    # the two rules that select nothing unless told what to read
    params = {"collection_names": "weights"} if name in ("AllZero", "TensorVariance") else {}
    rule = instantiate_rule(get_rule_class(name), trial, params, other_trials=[other])
    final = evaluate(trial, rule, assume_ended=True, sleep=lambda s: None)
    if name == "StalledTrainingRule":  # judges time, reads no tensor
        assert final.status is Status.NO_ISSUES_FOUND
    else:
        assert final.status is Status.ERROR, final
        # a records rule (docs/rules-beyond-debugger.md) names the records it never saw
        said = "the trial has no training records" if hasattr(rule, "missing_data") else "no "
        assert final.status_details.startswith(f"ClientError: Rule {name} judged nothing: {said}"), final.status_details
