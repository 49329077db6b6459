"""The reader against trials written by the real smdebug hook, and writer→reader roundtrips on
local directories and a real moto S3 server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import (
    Collection,
    ModeKeys,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrialWriter,
    create_trial,
)
from sdlocal.trial.proto import decode_event
from sdlocal.trial.tfrecord import iter_records

FIXTURES = ["healthy", "healthy_eval", "healthy_relu", "exploding", "vanishing", "dead_relu", "flat_loss", "zero_weights"]


def upload(root: Path, s3_client: Any, bucket: str, prefix: str) -> str:
    for f in sorted(root.rglob("*")):
        if f.is_file():
            s3_client.put_object(Bucket=bucket, Key=f"{prefix}/{f.relative_to(root).as_posix()}", Body=f.read_bytes())
    return f"s3://{bucket}/{prefix}"


def all_events(root: Path) -> dict[tuple[str, int], tuple[np.ndarray, ModeKeys, int]]:
    """Every tensor of a trial, read the slow way (whole events files), as ground truth."""
    out = {}
    for f in root.glob("events/*/*.tfevents"):
        for _, payload in iter_records(f.read_bytes()):
            d = decode_event(payload)
            out[(d.name, d.step)] = (d.value, d.mode, d.mode_step)
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_smdebug_fixture_trials(fixture_trials: Path, name: str) -> None:
    root = fixture_trials / name
    tr = create_trial(root)
    truth = all_events(root)
    assert tr.training_ended() and tr.loaded_all_steps
    assert tr.workers() == ["worker_0"] and tr.num_workers == 1
    steps = sorted({s for _, s in truth})
    assert tr.steps() == steps and tr.last_complete_step == steps[-1]
    assert tr.tensor_names() == sorted({n for n, _ in truth})
    assert "Sequential_fc0.weight" in tr.tensor_names(collection="weights")
    assert all(n.startswith("gradient/") for n in tr.tensor_names(collection="gradients"))
    assert tr.tensor_names(regex="CrossEntropyLoss") == ["CrossEntropyLoss_output_0"]
    for (tname, step), (value, _mode, _mode_step) in truth.items():
        got = tr.tensor(tname).value(step)
        np.testing.assert_array_equal(got, value)
        assert got.dtype == value.dtype


def test_healthy_eval_mixed_modes(fixture_trials: Path) -> None:
    tr = create_trial(fixture_trials / "healthy_eval")
    assert tr.modes() == [ModeKeys.TRAIN, ModeKeys.EVAL]
    assert len(tr.steps()) == 88
    assert tr.steps(ModeKeys.TRAIN) == list(range(80))
    assert tr.steps(ModeKeys.EVAL) == list(range(8))
    assert tr.mode_modestep(10) == (ModeKeys.EVAL, 0)
    assert tr.global_step(ModeKeys.EVAL, 0) == 10
    assert tr.global_step(ModeKeys.TRAIN, 10) == 11
    assert not any(n.startswith("gradient/") for n in tr.tensor_names(mode=ModeKeys.EVAL))
    assert "gradient/Sequential_fc0.weight" in tr.tensor_names(mode=ModeKeys.TRAIN)
    assert tr.tensor_names(step=0, mode="EVAL") == tr.tensor_names(step=10)
    loss = tr.tensor("CrossEntropyLoss_output_0")
    assert loss.steps(ModeKeys.EVAL) == list(range(8))
    np.testing.assert_array_equal(loss.value(0, mode=ModeKeys.EVAL), loss.value(10))
    grad = tr.tensor("gradient/Sequential_fc0.weight")
    with pytest.raises(TensorUnavailableForStep):
        grad.value(10)
    with pytest.raises(TensorUnavailable):
        tr.tensor("nope")


ROUNDTRIP = {
    "f16": np.linspace(-2, 2, 6, dtype=np.float16).reshape(2, 3),
    "f32": np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32),
    "f64": np.array([np.pi, -np.inf, np.nan]),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "i32": np.arange(-3, 3, dtype=np.int32).reshape(3, 2),
    "i64": np.array([2**62, -(2**62)], dtype=np.int64),
    "u8": np.arange(250, 256, dtype=np.uint8),
    "bool": np.array([[True, False], [False, True]]),
    "strings": np.array(["a", "bé", ""]),
    "scalar": np.float32(1.25),
    "zero_d": np.array(7, dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Any]:
    """(directory the writer writes, function mapping it to the path the reader opens)."""
    root = tmp_path / "trial"
    if request.param == "local":
        return root, lambda: (str(root), {})
    s3_client = request.getfixturevalue("s3_client")
    bucket = request.getfixturevalue("bucket")
    return root, lambda: (upload(root, s3_client, bucket, "job/debug-output"), {"s3_client": s3_client})


def test_roundtrip_all_dtypes(location: tuple[Path, Any]) -> None:
    root, open_args = location
    w = TrialWriter(root)
    w.write_collections([Collection("all", include_regex=(".*",))])
    w.write_step(0, ModeKeys.TRAIN, 0, ROUNDTRIP.items())
    w.write_step(1, ModeKeys.EVAL, 0, [("f32", ROUNDTRIP["f32"] * 2)])
    w.write_end_marker()
    path, kwargs = open_args()
    tr = create_trial(path, **kwargs)
    assert tr.tensor_names() == sorted(ROUNDTRIP)
    assert tr.tensor_names(collection="all") == sorted(ROUNDTRIP)
    for name, value in ROUNDTRIP.items():
        got = tr.tensor(name).value(0)
        expected = np.asarray(value)
        assert got.shape == expected.shape and got.dtype.kind == expected.dtype.kind, name
        np.testing.assert_array_equal(got, expected)
    assert tr.tensor("f32").steps() == [0, 1]
    assert tr.tensor("f32").steps(mode=ModeKeys.EVAL) == [0]
    np.testing.assert_array_equal(tr.tensor("f32").values(mode=ModeKeys.EVAL)[0], ROUNDTRIP["f32"] * 2)
    assert tr.tensor("f32").shape(1) == (4, 5)
    # values are the caller's own memory (local reads decode in place, S3 reads copy): writable,
    # and writing to one leaves the next read untouched
    first = tr.tensor("f32").value(0)
    first[...] = -1
    np.testing.assert_array_equal(tr.tensor("f32").value(0), ROUNDTRIP["f32"])


def test_reductions_saved_and_computed(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("weights", include_regex=("w",))])
    raw = np.array([[-3.0, 1.0], [2.0, 0.0]], dtype=np.float32)
    w.write_step(0, ModeKeys.TRAIN, 0, [("w", raw), ("smdebug/reductions/mean/w", np.float32(42.0)),
                                         ("smdebug/reductions/abs_l2_norm/w", np.float32(7.0))])
    w.write_step(1, ModeKeys.TRAIN, 1, [("smdebug/reductions/max/only_red", np.float32(5.0))])
    tr = create_trial(tmp_path)
    assert tr.tensor_names() == ["only_red", "w"]
    t = tr.tensor("w")
    assert t.reduction_value(0, "mean") == 42.0  # the saved one wins
    assert t.reduction_value(0, "l2", abs=True) == 7.0
    assert t.reduction_value(0, "max") == 2.0
    assert t.reduction_value(0, "min", abs=True) == 0.0
    assert t.reduction_value(0, "l1") == pytest.approx(6.0)
    assert t.reduction_value(0, "l2") == pytest.approx(np.sqrt(14.0))
    assert t.reduction_value(0, "variance") == pytest.approx(np.var(raw))
    assert t.reduction_value(0, "prod") == 0.0
    assert set(t.reduction_values(0)) == {("mean", False), ("l2", True)}
    only = tr.tensor("only_red")
    assert only.reduction_value(1, "max") == 5.0
    with pytest.raises(TensorUnavailableForStep, match="has reductions saved for this step"):
        only.value(1)


def test_step_errors(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("c")])
    w.write_step(0, ModeKeys.TRAIN, 0, [("a", np.ones(2))])
    w.write_step(5, ModeKeys.TRAIN, 5, [("a", np.ones(2))])
    tr = create_trial(tmp_path)
    t = tr.tensor("a")
    with pytest.raises(StepUnavailable):
        t.value(3)
    with pytest.raises(StepNotYetAvailable):
        t.value(9)
    w.write_step(9, ModeKeys.TRAIN, 9, [("a", np.full(2, 9.0))])
    assert t.value(9).tolist() == [9.0, 9.0]  # a missing step triggers one refresh


def test_s3_endpoint_from_argument_or_environment(
    tmp_path: Path, moto_server: str, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("c")])
    w.write_step(0, ModeKeys.TRAIN, 0, [("a", np.arange(3))])
    uri = upload(tmp_path, s3_client, bucket, "p/job/debug-output")
    assert create_trial(uri, endpoint_url=moto_server).tensor("a").value(0).tolist() == [0, 1, 2]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)  # boto3 resolves it itself
    tr = create_trial(uri + "/")
    assert tr.tensor("a").value(0).tolist() == [0, 1, 2]
    assert tr.name == "debug-output" and tr.storage.uri == uri
