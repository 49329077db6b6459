"""The uploader's scan (launcher/upload/watch.py) and the uploader keeping what it uploaded (a real moto):
work in proportion to new files, late files in old folders, index after events, a rewritten file,
and the job's objects uploaded again when S3 lost them."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.launcher.statuses.keeper import KeptStatus
from sdlocal.launcher.upload.uploader import Uploader, UploadTarget
from sdlocal.launcher.upload.watch import TreeWatch
from sdlocal.trial.storage import RetryPolicy, S3Storage
from sdlocal.trial.storage._retry import OUTAGES
from sdlocal.trial.writer import TrialWriter
from tests.helpers import s3_keys

SETTLE = 0.3  # folders quiet this long retire (5 s in a job): the tests wait in real time, as file times are real


def write(w: TrialWriter, step: int) -> None:
    w.write_step(step, "TRAIN", step, [("loss", np.float32(step))])


def rels(changes: Any, watch: TreeWatch | None = None) -> list[str]:
    """The changes' paths; marked uploaded when `watch` is given."""
    for c in changes if watch is not None else ():
        watch.done(c)
    return sorted(c.rel for c in changes)


class CountingOs:
    """Counts this thread's os.stat/os.scandir calls (the patch is process-wide: threads left
    running by earlier tests of a full run, uploaders among them, call them too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stats = self.scans = 0
        import sdlocal.launcher.upload.watch as watch

        real_stat, real_scandir = os.stat, os.scandir
        me = threading.get_ident()

        def stat(path: Any, *a: Any, **k: Any) -> Any:
            self.stats += threading.get_ident() == me
            return real_stat(path, *a, **k)

        def scandir(path: Any) -> Any:
            self.scans += threading.get_ident() == me
            return real_scandir(path)

        monkeypatch.setattr(watch.os, "stat", stat)
        monkeypatch.setattr(watch.os, "scandir", scandir)


def test_a_tick_costs_what_is_new_not_what_is_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = TrialWriter(tmp_path)
    # no sweep in this test (a loaded machine may take 30 s, the default, to get here): ticks only
    watch = TreeWatch(tmp_path, first=("index",), settle_s=SETTLE, sweep_s=3600)
    for step in range(1500):
        write(w, step)
    rels(watch.changes(), watch)
    time.sleep(1.2)  # the step folders settle and retire (and are past the coarse-clock margin)
    assert watch.changes() == []
    assert len(watch.active_dirs()) < 10  # memory: the parents and the newest folders, not 1,500 step folders
    counting = CountingOs(monkeypatch)
    write(w, 1500)
    changes = watch.changes()
    assert rels(changes) == ["events/000000001500/000000001500_worker_0.tfevents",
                             "index/000000001/000000001500_worker_0.json"]
    assert counting.stats < 20 and counting.scans < 10  # not one per file or folder of the 1,500 steps


def test_late_file_in_a_retired_folder_comes_at_the_sweep_and_the_final_pass(tmp_path: Path) -> None:
    w0, w1 = TrialWriter(tmp_path, "worker_0"), TrialWriter(tmp_path, "worker_1")
    watch = TreeWatch(tmp_path, settle_s=SETTLE, sweep_s=3)
    for step in range(5):
        write(w0, step)
    rels(watch.changes(), watch)
    time.sleep(1.2)
    watch.changes()  # retires the quiet step folders
    write(w1, 2)  # a slow worker's file in an old folder
    late = {"events/000000000002/000000000002_worker_1.tfevents", "index/000000000/000000000002_worker_1.json"}
    found = set(rels(watch.changes(), watch))  # the index folder is active; the step folder retired
    assert found == {"index/000000000/000000000002_worker_1.json"}
    time.sleep(2)
    found |= set(rels(watch.changes(), watch))  # the sweep brings the step folder back
    assert found == late
    # and the final pass finds what a sweep has not come to yet, and nothing twice
    write(w1, 3)
    assert rels(watch.final()) == ["events/000000000003/000000000003_worker_1.tfevents",
                                   "index/000000000/000000000003_worker_1.json"]


def test_a_top_level_folder_made_after_a_later_name_is_seen_at_the_next_tick(tmp_path: Path) -> None:
    # the XGBoost hook writes collections/ at the end, after events/ and index/: the final pass
    # missed it (then the end marker went up before the collections file, and every rule read Error)
    w = TrialWriter(tmp_path)
    watch = TreeWatch(tmp_path, first=("index",), settle_s=SETTLE, sweep_s=3600)
    for step in range(3):
        write(w, step)
        rels(watch.changes(), watch)
    (tmp_path / "collections" / "000000000").mkdir(parents=True)
    (tmp_path / "collections" / "000000000" / "worker_0_collections.json").write_text("{}")
    assert rels(watch.changes(), watch) == ["collections/000000000/worker_0_collections.json"]


def test_the_final_sweep_looks_inside_a_new_folder_it_finds(tmp_path: Path) -> None:
    # a folder named before its parent's newest one is found by a sweep; what is under it (here a
    # folder with a file) must come in the same pass, not at a tick that the final pass never gets
    watch = TreeWatch(tmp_path, settle_s=SETTLE, sweep_s=3600)
    (tmp_path / "system" / "2026112320").mkdir(parents=True)
    (tmp_path / "system" / "2026112320" / "a.json").write_text("1")
    rels(watch.changes(), watch)
    (tmp_path / "system" / "2026112319" / "late").mkdir(parents=True)
    (tmp_path / "system" / "2026112319" / "late" / "b.json").write_text("2")
    assert rels(watch.final(), watch) == ["system/2026112319/late/b.json"]


def test_index_goes_up_after_its_events_file_even_from_a_retired_folder(tmp_path: Path, s3_client: Any,
                                                                         bucket: str) -> None:
    root = tmp_path / "tensors"
    w0, w1 = TrialWriter(root, "worker_0"), TrialWriter(root, "worker_1")
    up = Uploader([UploadTarget(root, S3Storage(bucket, "job/debug-output", client=s3_client))], settle_s=SETTLE)
    for step in range(3):
        write(w0, step)
    up.sync_once()
    time.sleep(1.2)
    up.sync_once()
    assert "events/000000000001" not in up._watches[0].active_dirs()  # retired
    write(w1, 1)
    assert up.sync_once() == 2
    order = [u.split("/debug-output/", 1)[1] for u in up.uploaded][-2:]
    assert order == ["events/000000000001/000000000001_worker_1.tfevents", "index/000000000/000000000001_worker_1.json"]


def test_a_file_rewritten_in_place_goes_up_again(tmp_path: Path) -> None:
    (tmp_path / "tb").mkdir()
    f = tmp_path / "tb" / "events.out.tfevents.1"
    f.write_bytes(b"a")
    watch = TreeWatch(tmp_path, mutable=True)
    assert [c.rel for c in watch.changes()] == ["tb/events.out.tfevents.1"]
    for c in watch.changes():
        watch.done(c)
    with open(f, "ab") as fh:
        fh.write(b"more")
    assert [c.rel for c in watch.changes()] == ["tb/events.out.tfevents.1"]


def keys(client: Any, bucket: str, prefix: str) -> list[str]:
    return s3_keys(client, bucket, prefix)


def test_what_s3_lost_is_uploaded_again_in_order_with_markers_and_statuses(tmp_path: Path, s3_client: Any,
                                                                           bucket: str) -> None:
    root = tmp_path / "tensors"
    w = TrialWriter(root)
    out = S3Storage(bucket, "job/debug-output", client=s3_client)
    keeper = KeptStatus(S3Storage(bucket, "job/rule-output/R", client=s3_client))
    said: list[str] = []
    up = Uploader([UploadTarget(root, out)], echo=said.append, keepers=[keeper])
    for step in range(20):
        write(w, step)
    keeper.write("status.json", b'{"RuleEvaluationStatus": "IssuesFound"}')
    up.sync_once()
    up.write_marker(out, "training_job_end.ts")
    before = keys(s3_client, bucket, "job/")
    assert len(before) == 42
    # the endpoint restarts empty
    s3_client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in before]})
    up.uploaded.clear()
    up.sync_once()
    assert keys(s3_client, bucket, "job/") == before
    again = [u.split("/debug-output/", 1)[1] for u in up.uploaded]
    assert len(again) == 40 and all(again.index(f"events/{s:012d}/{s:012d}_worker_0.tfevents")
                                    < again.index(f"index/000000000/{s:012d}_worker_0.json") for s in range(20))
    assert s3_client.get_object(Bucket=bucket, Key="job/rule-output/R/status.json")["Body"].read() == \
        b'{"RuleEvaluationStatus": "IssuesFound"}'
    assert up.restored == 1 and keeper.restored == 1
    assert len(said) == 1 and "S3 lost the job's objects" in said[0]
    assert up.sync_once() == 0  # and nothing more after that


def test_a_kept_status_does_not_overwrite_a_newer_one(s3_client: Any, bucket: str) -> None:
    inner = S3Storage(bucket, "job/rule-output/R", client=s3_client)
    keeper = KeptStatus(inner)
    inner.write("status.json", b"old")
    keeper.poll()
    inner.delete("status.json")
    inner.write("status.json", b"newer")  # the evaluator wrote again after the restart
    keeper.poll()
    assert inner.read("status.json") == b"newer" and keeper.restored == 0


def test_the_final_upload_puts_back_a_file_s3_lost_without_the_first_one(tmp_path: Path, s3_client: Any,
                                                                          bucket: str) -> None:
    root = tmp_path / "tensors"
    w = TrialWriter(root)
    out = S3Storage(bucket, "job/debug-output", client=s3_client)
    said: list[str] = []
    up = Uploader([UploadTarget(root, out)], echo=said.append, interval=3600)
    up.start()  # (its first pass is an hour away: the passes below are the test's)
    try:
        for step in range(5):
            write(w, step)
        up.sync_once()
        before = keys(s3_client, bucket, "job/")
        lost = "job/debug-output/events/000000000003/000000000003_worker_0.tfevents"
        s3_client.delete_object(Bucket=bucket, Key=lost)  # the first object stays: the ticks see nothing
        assert up.sync_once() == 0
        # an outage said by the storage layer's retries (here: the endpoint restarted in between)
        OUTAGES.failing("http://s3.test", ConnectionError("refused"), RetryPolicy(), now=0.0)
        OUTAGES.answered("http://s3.test", clock=lambda: 1.0)
        assert up.doubt
        assert up.finish() == 1
        assert keys(s3_client, bucket, "job/") == before
        assert said == [f"Warning: 1 file(s) were not in {out.uri}: uploading them again"]
        assert up.finish() == 0  # nothing missing: nothing said, nothing uploaded
        assert len(said) == 1
    finally:
        up.close()


def test_without_a_fault_the_final_upload_does_not_list_s3(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    # no outage, no failed upload, no lost target: every PUT S3 answered is there, and a LIST of a
    # long job costs seconds, so the final upload does not compare (a file deleted behind the
    # launcher's back, with S3 answering all along, is not put back: nothing but a fault loses one)
    root = tmp_path / "tensors"
    w = TrialWriter(root)
    out = S3Storage(bucket, "job/debug-output", client=s3_client)
    up = Uploader([UploadTarget(root, out)])
    for step in range(3):
        write(w, step)
    up.sync_once()
    s3_client.delete_object(Bucket=bucket, Key="job/debug-output/events/000000000002/000000000002_worker_0.tfevents")
    assert not up.doubt and up.finish() == 0
