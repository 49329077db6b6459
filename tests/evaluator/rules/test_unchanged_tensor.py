"""UnchangedTensor compares training steps only, reads the state training changes by default, and
reads each tensor once a step (a sample compared, the whole tensor only to confirm)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import UnchangedTensor
from tests.evaluator._trials import make_trial, train_steps

W = "Net_fc1.weight"


def verdicts(rule: UnchangedTensor, steps: range | list[int]) -> list[Verdict]:
    return [rule.judge_step(s) for s in steps]


def test_an_evaluation_pass_is_not_a_stall(tmp_path: Path) -> None:
    """Weights saved at the 4 EVAL steps of one pass are equal (no update runs between them)."""
    steps = [(s, "TRAIN", s, {W: np.full(3, float(s), np.float32)}) for s in range(3)]
    steps += [(3 + i, "EVAL", i, {W: np.full(3, 2.0, np.float32)}) for i in range(4)]
    steps += [(7, "TRAIN", 3, {W: np.full(3, 3.0, np.float32)})]
    found = verdicts(UnchangedTensor(make_trial(tmp_path, steps)), range(8))
    assert not any(v.fired for v in found)
    assert found[3:7] == [Verdict.NOT_EVALUATED] * 4 and found[7] is Verdict.CONDITION_NOT_MET


def test_a_stall_across_training_steps_still_fires_across_an_evaluation_pass(tmp_path: Path) -> None:
    same = np.full(3, 1.0, np.float32)
    steps = [(0, "TRAIN", 0, {W: same}), (1, "EVAL", 0, {W: same}), (2, "TRAIN", 1, {W: same}),
             (3, "EVAL", 1, {W: same}), (4, "TRAIN", 2, {W: same})]
    assert verdicts(UnchangedTensor(make_trial(tmp_path, steps)), range(5))[-1] is Verdict.CONDITION_MET


def test_default_selection_is_the_trained_state_not_the_data(tmp_path: Path) -> None:
    """A GAN's constant real/fake targets (float) and a recurrent model's zero initial state are
    data: unchanged by design. Named explicitly, they are judged."""
    target = "BCELoss_input_1"
    steps = train_steps([{target: np.ones((32, 1), np.float32), W: np.full(2, float(i), np.float32)} for i in range(4)])
    trial = make_trial(tmp_path, steps)
    assert not any(v.fired for v in verdicts(UnchangedTensor(trial), range(4)))
    assert verdicts(UnchangedTensor(trial, tensor_regex="BCELoss_input_1"), range(4))[-1] is Verdict.CONDITION_MET


def test_a_change_outside_the_sample_is_a_change(tmp_path: Path) -> None:
    """Only the whole tensor proves a stall: a large tensor whose sampled elements are equal but
    one other element moved is not unchanged; equal whole tensors are."""
    big = np.zeros(100_003, np.float32)
    moved = big.copy()
    moved[1] = 1.0  # between two sampled positions
    trial = make_trial(tmp_path, train_steps([{W: big}, {W: moved}, {W: big}, {W: big}, {W: big}]))
    assert verdicts(UnchangedTensor(trial, collection_names="weights"), range(5)) == [
        Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET,
        Verdict.CONDITION_MET]


class CountingTrial:
    """The real trial, counting the values the rule reads."""

    def __init__(self, trial: Any) -> None:
        self.trial, self.reads = trial, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.trial, name)

    def tensor(self, name: str) -> Any:
        outer, tensor = self, self.trial.tensor(name)

        class Counted:
            def __getattr__(self, attr: str) -> Any:
                return getattr(tensor, attr)

            def value(self, *args: Any, **kwargs: Any) -> Any:
                outer.reads += 1
                return tensor.value(*args, **kwargs)

        return Counted()


def test_one_read_per_tensor_and_step_while_it_changes(tmp_path: Path) -> None:
    names = [f"Net_fc{i}.weight" for i in range(5)]
    trial = make_trial(tmp_path, train_steps([{n: np.full(10, float(s + i), np.float32) for i, n in enumerate(names)}
                                              for s in range(6)]))
    counting = CountingTrial(trial)
    rule = UnchangedTensor(counting)
    assert not any(v.fired for v in verdicts(rule, range(6)))
    assert counting.reads == 5 * 6  # smdebug's comparison read num_steps values of each tensor a step
