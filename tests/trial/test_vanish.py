"""A trial on S3 whose objects vanish (an endpoint restarted empty) and come back (uploaded again):
the reader neither skips nor re-reads a step, and does not take a partial listing for the end."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import Collection, TrialWriter
from sdlocal.trial.errors import MissingEventsFile
from sdlocal.trial.profiler.reader import ProfilerReader
from sdlocal.trial.refresh import no_refresh
from sdlocal.trial.storage import LocalStorage, Retry, RetryPolicy, S3Storage
from sdlocal.trial.trial import Trial


def upload(root: Path, st: S3Storage, *, only: str = "") -> None:
    """As the launcher does: events, collections, index, the end marker last."""
    files = [p for p in root.rglob("*") if p.is_file() and p.relative_to(root).as_posix().startswith(only)]
    rank = {"events": 0, "collections": 1, "index": 3}
    for p in sorted(files, key=lambda p: (p.name == "training_job_end.ts", rank.get(p.relative_to(root).parts[0], 2))):
        st.write_file(p.relative_to(root).as_posix(), p)


def wipe(st: S3Storage) -> None:
    st.delete_many(st.list(include_tmp=True))


def written(tmp_path: Path, steps: int, *, end: bool) -> Path:
    w = TrialWriter(tmp_path / "t")
    w.write_collections([Collection("losses", include_regex=("loss",))])
    for s in range(steps):
        w.write_step(s, "TRAIN", s, [("loss", np.float32(s))])
    if end:
        w.write_end_marker()
    return tmp_path / "t"


def s3(s3_client: Any, bucket: str, wait: float = 10.0) -> S3Storage:
    return S3Storage(bucket, "job/debug-output", client=s3_client, retry=Retry(RetryPolicy(total_s=wait)))


def test_a_value_whose_files_vanished_is_waited_for(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    root = written(tmp_path, 5, end=False)
    st = s3(s3_client, bucket)
    upload(root, st)
    tr = Trial(st)
    tr.refresh()
    assert tr.steps() == [0, 1, 2, 3, 4]
    wipe(st)
    threading.Timer(1.0, upload, (root, st)).start()
    started = time.monotonic()
    assert tr.tensor("loss").value(3) == 3.0  # not TensorUnavailableForStep: the step is not skipped
    assert 0.9 < time.monotonic() - started < 8


def test_a_vanished_value_that_never_comes_back_is_an_error(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    root = written(tmp_path, 2, end=False)
    st = s3(s3_client, bucket, wait=1.0)
    upload(root, st)
    tr = Trial(st)
    tr.refresh()
    wipe(st)
    started = time.monotonic()
    with pytest.raises(MissingEventsFile, match="events/000000000001/000000000001_worker_0.tfevents is missing"):
        tr.tensor("loss").value(1)
    assert time.monotonic() - started >= 1.0  # waited for it first (the outage window)
    assert tr.missing_files  # and the evaluator will say so


def test_an_events_file_missing_beside_its_index_is_waited_for(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    """An S3 that restarted empty gets the job's files back in the trial's order, but an index file
    PUT that was in flight when it went down lands before the re-upload of its events file: the
    reader waits for the events file (the outage window) instead of skipping the step."""
    root = written(tmp_path, 2, end=False)
    st = s3(s3_client, bucket, wait=30.0)
    upload(root, st)
    events = "events/000000000001/000000000001_worker_0.tfevents"
    st.delete(events)
    tr = Trial(st)
    tr.refresh()
    threading.Timer(1.0, st.write_file, (events, root / events)).start()
    started = time.monotonic()
    assert tr.tensor("loss").value(1) == 1.0
    assert 0.9 < time.monotonic() - started < 20 and tr.missing_files == []
    # locally no storage brings a file back: missing at once
    assert LocalStorage(root).outage_wait_s == 0


def test_a_partial_listing_after_the_end_marker_vanished_is_not_the_end(tmp_path: Path, s3_client: Any,
                                                                        bucket: str) -> None:
    root = written(tmp_path, 6, end=True)
    st = s3(s3_client, bucket)
    upload(root, st, only="collections")
    tr = Trial(st)
    tr.refresh()
    upload(root, st)
    assert tr.training_ended()  # seen before the next listing ...
    wipe(st)  # ... which an endpoint restart empties, and a re-upload has only begun
    upload(root, st, only="events")
    upload(root, st, only="index/000000000/000000000001")
    tr.refresh()
    assert not tr.loaded_all_steps and not tr.training_ended()
    assert tr.steps(show_incomplete_steps=True) == [1]
    upload(root, st)  # the rest, the end marker last
    assert tr.training_ended()
    tr.refresh()
    assert tr.loaded_all_steps and tr.steps() == [0, 1, 2, 3, 4, 5]


def test_an_index_file_gone_between_list_and_get_is_read_at_the_next_refresh(tmp_path: Path) -> None:
    root = written(tmp_path, 6, end=False)
    gone = {"index/000000000/000000000002_worker_0.json"}

    class Flaky(LocalStorage):
        def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
            if key in gone:
                gone.discard(key)
                raise FileNotFoundError(key)
            return super().read(key, start, length)

    tr = Trial(Flaky(root))
    tr.refresh()
    with no_refresh(tr):
        assert tr.steps() == [0, 1]
    tr.refresh()  # listed again from the last complete step: step 2 is not lost behind steps 3-5
    assert tr.steps() == [0, 1, 2, 3, 4, 5]


def test_profiler_reader_does_not_take_a_vanished_end_marker_for_the_end(tmp_path: Path, s3_client: Any,
                                                                        bucket: str) -> None:
    from sdlocal.trial.profiler.system_writer import Sample, SystemMetricsWriter

    root = tmp_path / "profiler-output"
    st = S3Storage(bucket, "job/profiler-output", client=s3_client, retry=Retry(RetryPolicy(total_s=5)))
    writer = SystemMetricsWriter(root, node_id="algo-1", close_interval_s=1)
    for i in range(3):
        writer.write([Sample("cpu", "cpu0", "CPUUtilization", 50.0)], 1_700_000_000.0 + i)
    writer.close()
    for p in sorted(root.rglob("*.json")):
        st.write_file(p.relative_to(root).as_posix(), p)
    st.write("system/training_job_end.ts", b"")

    class ThenWiped(S3Storage):
        """Wipes the prefix right after the first listing that saw the marker."""
        armed = True

        def list(self, prefix: str = "", start_after: str | None = None, **kw: Any) -> list[str]:
            keys = super().list(prefix, start_after, **kw)
            if self.armed and prefix == "system/" and "system/training_job_end.ts" in keys:
                self.armed = False
                wipe(st)
            return keys

    reader = ProfilerReader(ThenWiped(bucket, "job/profiler-output", client=s3_client, retry=st.retry))
    reader.refresh()
    assert not reader.loaded_all and not reader.training_ended()
    for p in sorted(root.rglob("*.json")):
        st.write_file(p.relative_to(root).as_posix(), p)
    st.write("system/training_job_end.ts", b"")
    reader.refresh()
    assert reader.loaded_all
    (series,) = reader.system.select(type="cpu").values()
    assert len(series[0]) == 3
