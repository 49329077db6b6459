"""smdebug's Trial and Tensor semantics, on trials written by our TrialWriter (local and on the
moto server): refresh by itself (and what it costs), no_refresh, has_passed_step / StepState,
wait_for_steps, which error a missing step or value raises, step_num keywords, prev_steps,
smdebug's mode enums, collections widened with include / add_tensor_name."""
from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import Collection, ModeKeys, TrialWriter, create_trial, no_refresh
from sdlocal.trial.errors import (
    InvalidWorker,
    MissingEventsFile,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdlocal.trial.steps import StepState
from sdlocal.trial.storage import S3Storage
from sdlocal.trial.trial import Trial
from tests.trial.test_live import CountingStorage
from tests.trial.test_reader import upload


class ForeignModes(enum.Enum):
    """Like the real smdebug's `smdebug.modes`: another Enum, named as ours (values differ on purpose)."""

    TRAIN = "t"
    EVAL = "e"
    PREDICT = "p"
    GLOBAL = "g"


def write(w: TrialWriter, step: int, mode: str = "TRAIN", mode_step: int | None = None, **tensors: Any) -> None:
    tensors = tensors or {"loss": np.float32(step), "w": np.full(3, float(step))}
    w.write_step(step, mode, step if mode_step is None else mode_step, [(n, np.asarray(v)) for n, v in tensors.items()])


def started(root: Path, steps: range | list[int] = range(3), worker: str = "worker_0") -> TrialWriter:
    w = TrialWriter(root, worker)
    w.write_collections([Collection("losses", include_regex=("loss",))])
    for s in steps:
        write(w, s)
    return w


def counting(root: Path) -> tuple[Trial, CountingStorage]:
    storage = CountingStorage(root)
    tr = Trial(storage)
    tr.refresh()
    storage.calls.clear()
    return tr, storage


# ---- refreshing by itself ------------------------------------------------------------------
def test_queries_see_new_data_without_an_explicit_refresh(tmp_path: Path) -> None:
    w = started(tmp_path)
    tr = create_trial(tmp_path)
    loss = tr.tensor("loss")
    assert tr.steps() == [0, 1, 2] and loss.steps() == [0, 1, 2]
    write(w, 3, bias=np.zeros(2))
    assert tr.steps() == [0, 1, 2, 3]
    assert "bias" in tr.tensor_names()
    write(w, 4)
    assert loss.steps() == [0, 1, 2, 4]  # a Tensor held from before sees it too (not saved at 3)
    write(w, 5, late=np.ones(1))
    assert tr.tensor("late").value(5).tolist() == [1.0]  # an unknown tensor: look, then answer
    write(w, 6)
    assert loss.value(6) == 6.0  # an unknown step of a known tensor
    assert tr.has_passed_step(6) is StepState.AVAILABLE
    assert tr.mode_modestep(6) == (ModeKeys.TRAIN, 6)


def test_live_s3_trial_refreshes_by_itself(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    w = started(tmp_path)
    uri = upload(tmp_path, s3_client, bucket, "job/debug-output")
    tr = create_trial(uri, s3_client=s3_client)
    assert tr.steps() == [0, 1, 2]
    write(w, 3)
    s3_client.put_object(Bucket=bucket, Key="job/debug-output/events/000000000003/000000000003_worker_0.tfevents",
                         Body=(tmp_path / "events/000000000003/000000000003_worker_0.tfevents").read_bytes())
    s3_client.put_object(Bucket=bucket, Key="job/debug-output/index/000000000/000000000003_worker_0.json",
                         Body=(tmp_path / "index/000000000/000000000003_worker_0.json").read_bytes())
    assert tr.steps() == [0, 1, 2, 3] and tr.tensor("loss").value(3) == 3.0


def test_a_finished_trial_answers_from_memory(tmp_path: Path) -> None:
    started(tmp_path).write_end_marker()
    tr, storage = counting(tmp_path)
    assert tr.loaded_all_steps
    for _ in range(3):
        tr.steps()
        tr.steps(ModeKeys.TRAIN)
        tr.tensor_names()
        tr.workers()
        tr.has_tensor("nope")
        tr.has_passed_step(99)
        tr.global_step(ModeKeys.EVAL, 0)
        tr.mode_modestep(99)
        tr.tensor("loss").steps()
        tr.refresh()
        tr.wait_for_steps([0, 1, 2])
        with pytest.raises(StepUnavailable):
            tr.tensor("loss").value(99)
    assert storage.calls == []


def test_a_live_trial_pays_one_listing_per_query_and_none_inside_no_refresh(tmp_path: Path) -> None:
    started(tmp_path)
    tr, storage = counting(tmp_path)
    tr.steps()
    assert [c[0] for c in storage.calls] == ["list"]  # the index after the last complete step
    storage.calls.clear()
    loss = tr.tensor("loss")
    loss.value(1)
    assert [c for c in storage.calls if c[0] == "list"] == []  # known tensor and step: no listing
    storage.calls.clear()
    with no_refresh(tr):
        tr.steps()
        tr.tensor_names()
        loss.steps()
        with pytest.raises(StepNotYetAvailable):
            loss.value(7)
    assert storage.calls == []


def test_no_refresh_freezes_nests_and_restores(tmp_path: Path) -> None:
    w = started(tmp_path)
    a, b = create_trial(tmp_path), create_trial(tmp_path)
    with no_refresh([a, b]) as trials:
        assert trials == [a, b]
        write(w, 3)
        assert a.steps() == b.steps() == [0, 1, 2]
        with no_refresh(a):
            pass
        assert not a.dynamic_refresh  # the inner block gave back the outer block's setting
    assert a.steps() == [0, 1, 2, 3] and a.dynamic_refresh
    with pytest.raises(RuntimeError), no_refresh(b):
        raise RuntimeError("boom")
    assert b.dynamic_refresh and b.steps() == [0, 1, 2, 3]
    tr = create_trial(tmp_path)
    tr.dynamic_refresh = False  # a trial frozen by hand stays frozen after a block
    with no_refresh(tr) as same:
        assert same is tr
    assert tr.dynamic_refresh is False


# ---- where a step stands ---------------------------------------------------------------------
def test_has_passed_step_single_worker(tmp_path: Path) -> None:
    w = started(tmp_path, [0, 1, 3])  # step 2 skipped
    tr = create_trial(tmp_path)
    assert tr.has_passed_step(1) is StepState.AVAILABLE
    assert tr.has_passed_step(2) is StepState.UNAVAILABLE  # step 3 is complete: 2 will never come
    assert tr.has_passed_step(4) is StepState.NOT_YET_AVAILABLE
    w.write_end_marker()
    assert tr.has_passed_step(4) is StepState.UNAVAILABLE


def test_has_passed_step_multi_worker(tmp_path: Path) -> None:
    a = started(tmp_path, range(4), "worker_0")
    b = TrialWriter(tmp_path, "worker_1")
    TrialWriter(tmp_path, "worker_0").write_collections([Collection("c")], num_workers=2)
    for s in (0, 1):
        write(b, s)
    tr = create_trial(tmp_path)
    assert tr.steps() == [0, 1] and tr.steps(show_incomplete_steps=True) == [0, 1, 2, 3]
    assert tr.last_complete_step == 1
    assert tr.has_passed_step(1) is StepState.AVAILABLE
    assert tr.has_passed_step(2) is StepState.NOT_YET_AVAILABLE  # worker_1 may still write it
    write(b, 3)  # worker_1 skipped 2 and moved past it
    assert tr.has_passed_step(2) is StepState.AVAILABLE and tr.last_complete_step == 3
    write(a, 5)
    assert tr.has_passed_step(4) is StepState.NOT_YET_AVAILABLE  # worker_1 has not passed 5 yet
    a.write_end_marker()
    assert tr.has_passed_step(4) is StepState.UNAVAILABLE and tr.has_passed_step(5) is StepState.AVAILABLE


def test_has_passed_step_per_mode(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("c")])
    for g in range(4):
        write(w, g, "TRAIN", g)  # TRAIN mode steps 0..3
    for i, g in enumerate(range(4, 8)):
        write(w, g, "EVAL", i * 10)  # EVAL mode steps 0, 10, 20, 30
    tr = create_trial(tmp_path)
    assert tr.has_passed_step(10, ModeKeys.EVAL) is StepState.AVAILABLE
    assert tr.has_passed_step(15, ModeKeys.EVAL) is StepState.UNAVAILABLE
    assert tr.has_passed_step(4, ModeKeys.TRAIN) is StepState.NOT_YET_AVAILABLE  # training may go on
    assert tr.has_passed_step(7) is StepState.AVAILABLE and tr.has_passed_step(8) is StepState.NOT_YET_AVAILABLE


def test_collections_worker_named_unlike_the_index_workers(tmp_path: Path) -> None:
    # smdebug's own test writers name the collections file worker_0 and the steps algo-1
    TrialWriter(tmp_path, "worker_0").write_collections([Collection("c")])
    w = TrialWriter(tmp_path, "algo-1")
    write(w, 0)
    tr = create_trial(tmp_path)
    assert tr.steps() == [0] and tr.has_passed_step(0) is StepState.AVAILABLE
    assert tr.workers() == ["algo-1", "worker_0"]


def test_wait_window_for_a_worker_that_stays_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "4")
    a = started(tmp_path, range(0, 100, 10), "worker_0")  # saves every 10 steps
    TrialWriter(tmp_path, "worker_0").write_collections([Collection("c")], num_workers=2)
    write(TrialWriter(tmp_path, "worker_1"), 0)  # then stops
    tr = create_trial(tmp_path)
    # 9 incomplete saved steps > 4: the oldest are taken as complete, 2 at a time, until at most 4 wait
    assert tr.steps() == [0, 10, 20, 30, 40, 50, 60] and tr.last_complete_step == 60
    assert tr.steps(show_incomplete_steps=True)[-1] == 90
    write(a, 100)
    assert tr.steps()[-1] == 60  # 4 waiting: within the window
    write(a, 110)
    assert tr.steps()[-1] == 80


# ---- waiting -------------------------------------------------------------------------------
class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_sleep: Any = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


def test_wait_for_steps(tmp_path: Path) -> None:
    w = started(tmp_path, [0, 1, 3])
    tr = create_trial(tmp_path)
    t = FakeTime()
    tr.wait_for_steps([0, 1, 3], sleep=t.sleep, clock=t.clock)
    assert t.sleeps == []
    with pytest.raises(StepUnavailable) as skipped:
        tr.wait_for_steps([2], sleep=t.sleep, clock=t.clock)
    assert (skipped.value.step, skipped.value.mode) == (2, ModeKeys.GLOBAL)
    t.on_sleep = lambda n: write(w, 3 + n) if n <= 2 else None
    tr.wait_for_steps([5], sleep=t.sleep, clock=t.clock)  # step 5 arrives during the second sleep
    assert t.sleeps == [2.0, 2.0]
    with pytest.raises(StepNotYetAvailable, match="Step 9 of mode GLOBAL not yet available"):
        tr.wait_for_steps([9], timeout=10, sleep=t.sleep, clock=t.clock)
    assert t.now == 14.0
    w.write_end_marker()
    with pytest.raises(NoMoreData) as past:
        tr.wait_for_steps([9], ModeKeys.TRAIN, sleep=t.sleep, clock=t.clock)
    assert (past.value.step, past.value.mode, past.value.last_step) == (9, ModeKeys.TRAIN, 5)
    assert str(past.value) == "Looking for step 9 of mode TRAIN and reached end of training. Max step available is 5"
    with no_refresh(tr), pytest.raises(StepUnavailable):
        tr.wait_for_steps([2], sleep=t.sleep, clock=t.clock)
    assert tr.dynamic_refresh  # smdebug's wait leaves its trial frozen for good; ours leaves it as it was


def test_wait_for_steps_refreshes_inside_no_refresh(tmp_path: Path) -> None:
    w = started(tmp_path)
    tr = create_trial(tmp_path)
    t = FakeTime()
    t.on_sleep = lambda n: write(w, 3)
    with no_refresh(tr):
        tr.wait_for_steps([3], sleep=t.sleep, clock=t.clock)
        assert tr.steps() == [0, 1, 2, 3]


# ---- which error, for what -----------------------------------------------------------------
def test_missing_step_and_value_errors(tmp_path: Path) -> None:
    w = started(tmp_path, [0, 2])
    write(w, 3, loss=np.float32(3))  # "w" not saved at 3
    write(w, 4, **{"smdebug/reductions/max/w": np.float32(4)})  # only a reduction of "w" at 4
    tr = create_trial(tmp_path)
    wt = tr.tensor("w")
    with pytest.raises(StepUnavailable, match="Step 1 of mode GLOBAL is not available as it was not saved"):
        wt.value(1)
    with pytest.raises(TensorUnavailableForStep, match="Value for tensor w is not available for step 3 with mode GLOBAL"):
        wt.value(3)
    with pytest.raises(TensorUnavailableForStep, match="has reductions saved for this step") as reduced:
        wt.value(4)
    assert reduced.value.has_reductions and wt.reduction_value(4, "max") == 4.0
    with pytest.raises(ShapeUnavailableForStep, match="Shape for tensor w is not available for step 4"):
        wt.shape(4)
    assert wt.shapes() == {0: (3,), 2: (3,)}
    with pytest.raises(StepNotYetAvailable):
        wt.value(5)
    with pytest.raises(TensorUnavailable, match="Tensor nope was not saved"):
        tr.tensor("nope")
    w.write_end_marker()
    with pytest.raises(StepUnavailable):  # past the end of a finished training (wait_for_steps: NoMoreData)
        wt.value(5)
    with pytest.raises(InvalidWorker, match="Invalid Worker: worker_9"):
        wt.value(0, worker="worker_9")


@pytest.mark.parametrize("where", ["local", "s3"])
def test_missing_events_file_is_named_and_kept(tmp_path: Path, where: str, request: pytest.FixtureRequest) -> None:
    w = started(tmp_path / "t")
    w.write_end_marker()
    events = "events/000000000001/000000000001_worker_0.tfevents"
    if where == "local":
        (tmp_path / "t" / events).unlink()
        tr = create_trial(tmp_path / "t")
    else:
        s3_client, bucket = request.getfixturevalue("s3_client"), request.getfixturevalue("bucket")
        uri = upload(tmp_path / "t", s3_client, bucket, "job")
        S3Storage(bucket, "job", client=s3_client).delete(events)
        # missing for good once S3's outage window (waited for it to come back) has passed
        request.getfixturevalue("monkeypatch").setenv("SDLOCAL_S3_RETRY_S", "1")
        tr = create_trial(uri, s3_client=s3_client)
    assert tr.tensor("loss").value(0) == 0.0
    # smdebug's exception type (code written against it catches it), with a message naming the file
    with pytest.raises(TensorUnavailableForStep, match=f"{events} is missing: the trial's index names it for step 1"):
        tr.tensor("loss").value(1)
    with pytest.raises(MissingEventsFile):
        tr.tensor("w").reduction_value(1, "max")
    assert tr.missing_files == [f"{tr.path.rstrip('/')}/{events}"]  # kept for the evaluator


def test_index_file_without_events_file_name(tmp_path: Path) -> None:
    started(tmp_path, [0])
    (tmp_path / "index/000000000/000000000001_worker_0.json").write_text(
        '{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": ""},'
        ' "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": 1}]}')
    tr = create_trial(tmp_path)
    assert tr.steps() == [0, 1] and tr.tensor("loss").steps() == [0, 1]
    with pytest.raises(TensorUnavailableForStep):
        tr.tensor("loss").value(1)


# ---- smdebug's signatures and modes --------------------------------------------------------
def test_step_num_keywords_and_prev_steps(tmp_path: Path) -> None:
    started(tmp_path, [0, 2, 4, 6]).write_end_marker()
    t = create_trial(tmp_path).tensor("w")
    assert t.value(step_num=2, mode=ModeKeys.GLOBAL, worker="worker_0").tolist() == [2.0] * 3
    assert t.shape(step_num=2) == (3,) and t.workers(step_num=2) == ["worker_0"]
    assert t.reduction_value(step_num=4, reduction_name="max", abs=True) == 4.0
    assert t.reduction_values(step_num=4) == {}
    assert t.prev_steps(4) == [0, 2, 4]  # smdebug's: up to and including the step
    assert t.prev_steps(5, n=2) == [2, 4] and t.prev_steps(4, n=0) == [0, 2, 4]


def test_smdebug_mode_enums_accepted_everywhere(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("c")])
    write(w, 0, "TRAIN", 0)
    write(w, 1, "EVAL", 0, loss=np.float32(10))
    write(w, 2, "TRAIN", 1)
    w.write_end_marker()
    tr = create_trial(tmp_path)
    for train, ev, glob in ((ForeignModes.TRAIN, ForeignModes.EVAL, ForeignModes.GLOBAL),
                            ("TRAIN", "ModeKeys.EVAL", 4), (ModeKeys.TRAIN, ModeKeys.EVAL, None)):
        assert tr.steps(mode=train) == [0, 1] and tr.steps(mode=ev) == [0] and tr.steps(mode=glob) == [0, 1, 2]
        assert tr.global_step(ev, 0) == 1 and tr.global_step(glob, 2) == 2
        assert tr.tensor_names(mode=ev) == ["loss"] and tr.tensor_names(step=0, mode=ev) == ["loss"]
        assert tr.has_passed_step(1, train) is StepState.AVAILABLE
        tr.wait_for_steps([0], ev)
        loss = tr.tensor("loss")
        assert loss.steps(mode=ev) == [0] and loss.value(0, mode=ev) == 10.0
        assert loss.prev_steps(1, mode=train) == [0, 1]
    assert tr.modes() == [ModeKeys.TRAIN, ModeKeys.EVAL]
    assert tr.tensor_names(step=7, mode=ModeKeys.EVAL) == [] and tr.tensor_names(mode=ModeKeys.PREDICT) == []
    assert tr._global_to_mode == {0: (ModeKeys.TRAIN, 0), 1: (ModeKeys.EVAL, 0), 2: (ModeKeys.TRAIN, 1)}
    assert tr._mode_to_global == {ModeKeys.TRAIN: {0: 0, 1: 2}, ModeKeys.EVAL: {0: 1}}
    with pytest.raises(ValueError, match="unknown mode"):
        tr.steps(mode="TRAINING")


def test_modes_leave_out_global(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    write(w, 0, "GLOBAL", 0)
    tr = create_trial(tmp_path)
    assert tr.modes() == [] and tr.steps() == [0]


def test_collections_widened_by_analysis_code(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("weights", include_regex=("^w",))])
    w.write_step(0, "TRAIN", 0, [(n, np.ones(1)) for n in ("w1", "w2", "b1", "b2", "loss")])
    tr = create_trial(tmp_path)
    assert tr.tensor_names(collection="weights") == ["w1", "w2"]
    tr.collection("weights").include("^b1$")
    tr.collection("weights").add_tensor_name("loss")
    assert tr.tensor_names(collection="weights") == ["b1", "loss", "w1", "w2"]
    mine = tr.collection("mine")  # as smdebug: a collection the trial lacks is made, empty
    assert tr.tensor_names(collection="mine") == [] and "mine" in tr.collections()
    mine.include(["b", ["^loss$"]])
    mine.tensor_names = ["w2"]
    assert tr.tensor_names(collection=mine) == ["b1", "b2", "loss", "w2"]
    with pytest.raises(ValueError, match="Only one of `regex` or `collection`"):
        tr.tensor_names(collection="weights", regex="w")
    with pytest.raises(TypeError):
        mine.include(3)  # type: ignore[arg-type]


def test_range_steps_with_open_ends(tmp_path: Path) -> None:
    started(tmp_path, range(6))
    assert create_trial(tmp_path, range_steps=(2, None)).steps() == [2, 3, 4, 5]
    assert create_trial(tmp_path, range_steps=(None, 2)).steps() == [0, 1]


def test_smdebug_style_open_waits_for_collections_with_a_deadline(tmp_path: Path) -> None:
    from sdlocal.trial.errors import MissingCollectionFiles
    from sdlocal.trial.kinds import LocalTrial, open_trial

    t = FakeTime()
    t.on_sleep = lambda n: started(tmp_path / "late", [0, 1]) if n == 3 else None
    late = LocalTrial("late", str(tmp_path / "late"), sleep=t.sleep, clock=t.clock)
    assert t.sleeps == [2.0, 2.0, 2.0] and late.steps() == [0, 1]
    t = FakeTime()
    with pytest.raises(MissingCollectionFiles, match="did not appear .* within 30s"):
        open_trial(str(tmp_path / "never"), collections_timeout=30, sleep=t.sleep, clock=t.clock)
    assert t.now == 30.0
    assert open_trial(f" {tmp_path / 'late'}/ ").name == "late"  # smdebug strips the path
