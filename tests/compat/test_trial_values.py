"""Values read through smdebug's API (`smdebug.trials.create_trial(...).tensor(name).value(step)`,
sdlocal's facade) are right and are arrays of their own: equal to what was written (checked
against the general decoder, not the reader's fast path), writable, and a write to one changes
neither another value nor a later read of the same one. For trials written by sdlocal and by the
real smdebug hook, local and on S3, large values (mapped from local files, aligned or not in the
file) and small ones."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from smdebug.trials import create_trial

from sdlocal.trial import ModeKeys, TrialWriter
from sdlocal.trial.proto import decode_event
from sdlocal.trial.tfrecord import iter_records

REPO = Path(__file__).resolve().parents[2]


def written_values(root: Path) -> dict[tuple[str, int], np.ndarray]:
    """(tensor, step) -> value, every record of every events file decoded by the general path."""
    out = {}
    for events in sorted(root.rglob("*.tfevents")):
        data = events.read_bytes()
        for offset, payload in iter_records(data, where=str(events)):
            event = decode_event(payload, where=str(events), offset=offset)
            out[(event.name, event.step)] = event.value
    return out


def upload(root: Path, s3_client: Any, bucket: str, steps: int | None = None) -> str:
    """The trial under s3://bucket/t; `steps`: only its first steps (events and index files)."""
    for f in root.rglob("*"):
        if f.is_file() and (steps is None or not f.name[:12].isdigit() or int(f.name[:12]) < steps):
            s3_client.put_object(Bucket=bucket, Key=f"t/{f.relative_to(root).as_posix()}", Body=f.read_bytes())
    return f"s3://{bucket}/t"


def check_values_are_right_and_their_own(path: str, expected: dict[tuple[str, int], np.ndarray], **kw: Any) -> None:
    trial = create_trial(path, **kw)
    got = {(name, step): trial.tensor(name).value(step)
           for name in trial.tensor_names() for step in trial.tensor(name).steps()}
    assert got.keys() == expected.keys()
    again = {key: trial.tensor(key[0]).value(key[1]) for key in got}
    for key, value in got.items():
        np.testing.assert_array_equal(value, expected[key], err_msg=str(key))
        assert isinstance(value, np.ndarray) and value.flags.writeable, key
    for value in got.values():  # a write to every value read once...
        value[...] = 0 if value.dtype.kind in "biu" else np.nan
    for key, value in again.items():  # ...changes neither the same values read before it...
        np.testing.assert_array_equal(value, expected[key], err_msg=str(key))
    for key in got:  # ...nor a read after it
        np.testing.assert_array_equal(trial.tensor(key[0]).value(key[1]), expected[key], err_msg=str(key))


def write_large(root: Path) -> None:
    """Step files of several large tensors whose tags differ in length: their data lie at every
    offset modulo 4 in the files (so some large values are unaligned views of their mappings)."""
    rng = np.random.default_rng(3)
    writer = TrialWriter(root)
    for step in range(2):
        writer.write_step(step, ModeKeys.TRAIN, step,
                          [("w" * k, rng.standard_normal((600, 700)).astype(np.float32)) for k in range(1, 5)]
                          + [("loss", np.float32(step))])
    writer.write_collections([])
    writer.write_end_marker()


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_large_values_written_by_sdlocal(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    write_large(tmp_path / "t")
    expected = written_values(tmp_path / "t")
    path, kw = str(tmp_path / "t"), {}
    if backend == "s3":
        kw["s3_client"] = request.getfixturevalue("s3_client")
        path = upload(tmp_path / "t", kw["s3_client"], request.getfixturevalue("bucket"))
    check_values_are_right_and_their_own(path, expected, **kw)
    if backend == "local":  # the unaligned ones compute as any array (reductions, BLAS)
        trial = create_trial(path)
        values = [trial.tensor("w" * k).value(s) for k in range(1, 5) for s in range(2)]
        assert {v.flags.aligned for v in values} == {True, False}
        for v in values:
            c = v.copy()
            assert float(np.linalg.norm(v)) == pytest.approx(float(np.linalg.norm(c)), rel=1e-6)
            assert float(np.mean(v)) == pytest.approx(float(np.mean(c)), rel=1e-5, abs=1e-7)
            np.testing.assert_allclose(v[:5] @ v[:5].T, c[:5] @ c[:5].T, rtol=1e-4, atol=1e-3)
        unaligned = next(name for name in ("w", "ww", "www", "wwww") for s in range(2)
                         if not trial.tensor(name).value(s).flags.aligned)
        tensor = trial.tensor(unaligned)
        step = next(s for s in range(2) if not tensor.value(s).flags.aligned)
        assert float(tensor.reduction_value(step, "l2")) == pytest.approx(
            float(np.linalg.norm(tensor.value(step).copy())), rel=1e-5)


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_values_of_trials_written_by_the_real_smdebug_hook(backend: str, fixture_trials: Path,
                                                          request: pytest.FixtureRequest) -> None:
    root = fixture_trials / "healthy_eval"
    expected = written_values(root)
    path, kw = str(root), {}
    if backend == "s3":  # the first steps: one GET per value, three reads of each
        kw = {"s3_client": request.getfixturevalue("s3_client")}
        path = upload(root, kw["s3_client"], request.getfixturevalue("bucket"), steps=6)
        expected = {key: v for key, v in expected.items() if key[1] < 6}
    check_values_are_right_and_their_own(path, expected, **kw)


@pytest.mark.slow
def test_large_values_written_by_the_real_smdebug_hook(smdebug_python: Path, tmp_path: Path) -> None:
    """smdebug's own step files (a large weight and the loss per step: the weight's data lie
    wherever the loss record leaves them)."""
    subprocess.run([str(smdebug_python), str(REPO / "benchmarks" / "workers" / "write_trial.py"), "--writer",
                    "smdebug", "--workload", "large", "--steps", "4", "--rows", "512", "--cols", "1024",
                    "--out-dir", str(tmp_path / "t")], check=True, capture_output=True, timeout=300)
    check_values_are_right_and_their_own(str(tmp_path / "t"), written_values(tmp_path / "t"))
