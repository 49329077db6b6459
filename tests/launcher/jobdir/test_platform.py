"""The platform: config files in the job dir, the continuous uploader (against moto), the end marker."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.launcher.job.record import new_record, write_record
from sdlocal.launcher.jobdir.configs import write_configs
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.spec.parse import spec_from_request
from sdlocal.launcher.upload.uploader import Uploader, UploadTarget, write_end_marker
from sdlocal.trial.collection import Collection
from sdlocal.trial.storage import S3Storage
from sdlocal.trial.writer import TrialWriter
from tests.helpers import s3_keys


def keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    return s3_keys(client, bucket, prefix)


def test_write_configs(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = spec_from_request(
        {"TrainingJobName": "j1", "EntryPoint": "train.py", "HyperParameters": {"lr": "0.1"},
         "DebugRuleConfigurations": [{"RuleConfigurationName": "VanishingGradient"}],
         "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 100},
         "TensorBoardOutputConfig": {"S3OutputPath": "s3://b/tb"}},
        base_dir=tmp_path, check_rule_names=False,
    )
    job_dir = JobDir(tmp_path / "job")
    write_configs(spec, job_dir)
    write_record(job_dir.root, new_record(spec, "http://127.0.0.1:1"))
    hook = json.loads(job_dir.config_file("debughookconfig").read_text())
    assert hook["LocalPath"] == str(job_dir.tensors)
    assert hook["S3OutputPath"] == "s3://sdlocal/jobs/j1/debug-output"
    assert hook["CollectionConfigurations"] == [{"CollectionName": "gradients",
                                                 "CollectionParameters": {"save_interval": "500"}}]
    prof = json.loads(job_dir.config_file("profilerconfig").read_text())
    assert prof["ProfilingParameters"]["ProfilingIntervalInMilliseconds"] == "100"
    assert json.loads(job_dir.config_file("tensorboardoutputconfig").read_text()) == {
        "LocalPath": str(job_dir.tensorboard)}
    assert json.loads(job_dir.config_file("resourceconfig").read_text())["current_host"] == "algo-1"
    assert json.loads(job_dir.config_file("hyperparameters").read_text()) == {"lr": "0.1"}
    record = json.loads(job_dir.record.read_text())
    assert record["DebugRules"][0]["RuleOutput"] == "s3://sdlocal/jobs/j1/rule-output/VanishingGradient"


def test_uploader_order_no_tmp_reupload_changed(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    root = tmp_path / "tensors"
    writer = TrialWriter(root)
    writer.write_collections([Collection("weights", include_regex=("weight",))])
    for step in range(3):
        writer.write_step(step, "TRAIN", step, [("Net_fc.weight", np.ones((2, 2), dtype=np.float32) * step)])
    (root / "events" / "000000000009").mkdir(parents=True)
    (root / "events" / "000000000009" / "000000000009_worker_0.tfevents.tmp").write_bytes(b"partial")
    writer.write_end_marker()  # the hook's own marker is never uploaded early: the platform writes it

    up = Uploader([UploadTarget(root, S3Storage(bucket, "out/job/debug-output", client=s3_client))])
    assert up.sync_once() == 7
    rel = [u.split("/debug-output/", 1)[1] for u in up.uploaded]
    assert not [r for r in rel if r.endswith(".tmp") or r.endswith("training_job_end.ts")]
    for step in range(3):
        ev = rel.index(f"events/{step:012d}/{step:012d}_worker_0.tfevents")
        ix = rel.index(f"index/000000000/{step:012d}_worker_0.json")
        assert ev < ix
    assert rel.index("collections/000000000/worker_0_collections.json") < min(
        i for i, r in enumerate(rel) if r.startswith("index/"))
    assert len(keys(s3_client, bucket)) == 7

    assert up.sync_once() == 0  # each file once
    coll = root / "collections" / "000000000" / "worker_0_collections.json"
    coll.write_text(coll.read_text() + " ")
    assert up.sync_once() == 1  # again when it changed
    assert up.uploaded[-1].endswith("worker_0_collections.json")


def test_uploader_thread_and_final_upload_then_end_marker(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    root = tmp_path / "tensors"
    output = S3Storage(bucket, "p/debug-output", client=s3_client)
    up = Uploader([UploadTarget(root, output)], interval=0.05)
    up.start()
    TrialWriter(root).write_step(0, "TRAIN", 0, [("loss", np.float32(1.0))])
    up.finish()
    up.close()
    write_end_marker(output)
    assert keys(s3_client, bucket) == [
        "p/debug-output/events/000000000000/000000000000_worker_0.tfevents",
        "p/debug-output/index/000000000/000000000000_worker_0.json",
        "p/debug-output/training_job_end.ts",
    ]
