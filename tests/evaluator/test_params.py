from __future__ import annotations

import pytest

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_bool, parse_float, parse_int, parse_mode, parse_str_list
from sdlocal.trial.modes import ModeKeys


def test_float_from_strings_and_numbers() -> None:
    assert parse_float("R", "threshold", "1e-7") == 1e-7
    assert parse_float("R", "threshold", " 20.0 ") == 20.0
    assert parse_float("R", "threshold", 3) == 3.0


@pytest.mark.parametrize("value", ["abc", "", "None", "nan", True])
def test_float_rejects_with_rule_and_parameter_named(value: object) -> None:
    with pytest.raises(RuleParameterError) as info:
        parse_float("VanishingGradient", "threshold", value)
    assert info.value.rule == "VanishingGradient" and info.value.parameter == "threshold"
    assert "VanishingGradient" in str(info.value) and "threshold" in str(info.value)


def test_float_bounds_and_optional() -> None:
    with pytest.raises(RuleParameterError, match="must be >= 0"):
        parse_float("R", "t", "-1", minimum=0.0)
    with pytest.raises(RuleParameterError, match="must be <= 100"):
        parse_float("R", "t", "101", maximum=100.0)
    assert parse_float("R", "t", "None", allow_none=True) is None


def test_int() -> None:
    assert parse_int("R", "num_steps", "10") == 10
    assert parse_int("R", "num_steps", "10.0") == 10
    assert parse_int("R", "start_step", None, allow_none=True) is None
    for bad in ("10.5", "ten", False):
        with pytest.raises(RuleParameterError, match="num_steps"):
            parse_int("R", "num_steps", bad)
    with pytest.raises(RuleParameterError, match=">= 2"):
        parse_int("R", "num_steps", "1", minimum=2)


@pytest.mark.parametrize(("text", "expected"), [("True", True), ("true", True), ("False", False), ("false", False), (True, True), ("0", False)])
def test_bool(text: object, expected: bool) -> None:
    assert parse_bool("R", "only_nan", text) is expected


def test_bool_rejects() -> None:
    with pytest.raises(RuleParameterError, match="only_nan"):
        parse_bool("R", "only_nan", "maybe")


def test_lists() -> None:
    assert parse_str_list("R", "collection_names", "weights, biases,") == ("weights", "biases")
    assert parse_str_list("R", "collection_names", ["weights"]) == ("weights",)
    assert parse_str_list("R", "collection_names", "None") == ()
    assert parse_str_list("R", "collection_names", None) == ()
    with pytest.raises(RuleParameterError):
        parse_str_list("R", "collection_names", 5)


def test_mode() -> None:
    assert parse_mode("R", "mode", "EVAL") is ModeKeys.EVAL
    assert parse_mode("R", "mode", "ModeKeys.TRAIN") is ModeKeys.TRAIN
    assert parse_mode("R", "mode", "None") is None
    with pytest.raises(RuleParameterError, match="mode"):
        parse_mode("R", "mode", "TRAINING")
