"""CheckInputImages on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import CheckInputImages
from sdlocal.evaluator.status import Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, make_trial, train_steps

IMG = "Net_hybridsequential0_input_0"
RNG = np.random.default_rng(3)


def images(n: int, mean: float = 0.0, shape: tuple[int, ...] = (3, 4, 4)) -> np.ndarray:
    return (RNG.standard_normal((n, *shape)) * 0.1 + mean).astype(np.float32)


def verdicts(rule: CheckInputImages, steps: range) -> list[Verdict]:
    return [rule.judge_step(s) for s in steps]


def test_unnormalized_images_fire_after_threshold_samples(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{IMG: images(300, 0.5)}, {IMG: images(300, 0.5)}]))
    assert verdicts(CheckInputImages(trial), range(2)) == [Verdict.NOT_EVALUATED, Verdict.CONDITION_MET]
    assert verdicts(CheckInputImages(trial, threshold_samples="300"), range(1)) == [Verdict.CONDITION_MET]
    assert verdicts(CheckInputImages(trial, threshold_mean="0.6"), range(2))[1] is Verdict.CONDITION_NOT_MET


def test_normalized_images_are_silent(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{IMG: images(600)}]))
    assert CheckInputImages(trial).judge_step(0) is Verdict.CONDITION_NOT_MET


def test_one_channel_off_and_channels_last(tmp_path: Path) -> None:
    nchw = images(500)
    nchw[:, 2] += 1.0  # only the third channel is not normalized
    nhwc = np.moveaxis(nchw, 1, 3).copy()
    trial = make_trial(tmp_path, train_steps([{IMG: nchw}, {"nhwc_input_0": nhwc}]))
    assert CheckInputImages(trial).judge_step(0) is Verdict.CONDITION_MET
    # channel 3 of NHWC: the same finding; channel 1 of NHWC would average the channels away
    assert CheckInputImages(trial, regex="nhwc", channel="3").judge_step(1) is Verdict.CONDITION_MET
    assert CheckInputImages(trial, regex="nhwc", channel="1", threshold_mean="0.5").judge_step(1) is Verdict.CONDITION_NOT_MET


def test_collection_members_nan_mixed_modes_missing_steps(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections((*COLLECTIONS, Collection("input_image", tensor_names=frozenset({"Net_input_0"}))))
    with_nan = images(250, 0.5)
    with_nan[:10] = np.nan
    writer.write_step(0, "TRAIN", 0, [("Net_input_0", with_nan)])
    writer.write_step(1, "TRAIN", 1, [("CrossEntropyLoss_output_0", np.float32(1))])
    writer.write_step(2, "EVAL", 0, [("Net_input_0", images(250, 0.5))])
    writer.write_end_marker()
    rule = CheckInputImages(create_trial(str(tmp_path)))
    assert verdicts(rule, range(3)) == [Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED, Verdict.CONDITION_MET]
    assert rule.judge_step(2) is Verdict.CONDITION_MET  # a step is counted once


def test_no_images_and_tensors_without_the_channel_axis(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{"x": np.ones(600, np.float32)}, {IMG: np.ones(600, np.float32)}]))
    assert verdicts(CheckInputImages(trial), range(2)) == [Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED]
    assert evaluate_trial(str(tmp_path), "CheckInputImages", {}).status is Status.NO_ISSUES_FOUND


@pytest.mark.parametrize(("param", "value"), [("threshold_mean", "high"), ("threshold_samples", "0"),
                                              ("channel", "0"), ("regex", "(")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    trial = make_trial(tmp_path, train_steps([{IMG: images(2)}]))
    with pytest.raises(RuleParameterError, match=param) as raised:
        CheckInputImages(trial, **{param: value})
    assert raised.value.parameter == param
    status = evaluate_trial(str(tmp_path), "CheckInputImages", {param: value})
    assert status.status is Status.ERROR and param in status.status_details


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu"])
def test_fixture_trials_without_images_say_the_rule_judged_nothing(fixture_trials: Path, trial_name: str) -> None:
    # no verdict without data (evaluator/unjudged.py): not NoIssuesFound, an Error naming what it never saw
    status = evaluate_trial(str(fixture_trials / trial_name), "CheckInputImages", {})
    assert status.status is Status.ERROR, status.status_details
    assert "Rule CheckInputImages judged nothing: no tensor of collection 'input_image' was saved" in \
        status.status_details


def test_images_scaled_to_minus_one_one_are_normalized(tmp_path: Path) -> None:
    """[0, 1] pixels scaled to [-1, 1] (a GAN's inputs, Normalize((0.5,), (0.5,))): mostly-dark images
    have channel means near -0.7, and they are normalized; the same images in [0, 1] or as 0-255
    pixels are not."""
    pixels = (RNG.random((600, 1, 8, 8)) < 0.15).astype(np.float32)  # MNIST-like: mostly background
    scaled = pixels * 2 - 1
    assert abs(float(scaled.mean())) > 0.5
    trial = make_trial(tmp_path, train_steps([{IMG: scaled}]))
    assert CheckInputImages(trial).judge_step(0) is Verdict.CONDITION_NOT_MET
    half = (RNG.random((600, 1, 8, 8)) < 0.5).astype(np.float32)  # [0, 1], channel mean 0.5
    for name, value in (("unit", half), ("bytes", pixels * 255)):
        raw = make_trial(tmp_path / name, train_steps([{IMG: value}]))
        assert CheckInputImages(raw).judge_step(0) is Verdict.CONDITION_MET
