"""How late system metrics reach S3 during a job: a real job (process runtime, a training that
sleeps for `--seconds`) with a ProfilerConfig, against a moto server started here; a thread lists
the profiler prefix every 100 ms and notes when each system file first appears.

    python benchmarks/profiler_upload.py [--seconds 60] [--interval-ms 500] [--upload-interval 1.0]

Per system file: the age of its OLDEST sample when the file became visible in S3 (what a rule
waits for the first sample of a file) and of its NEWEST. Files per minute of training. A profiler
rule sees a sample once its evaluator polls after that (its poll interval on top). The files are
read back from S3 and every sample counted, so a benchmark of nothing fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sdlocal.launcher.job.run import RunOptions, run_job  # noqa: E402
from sdlocal.launcher.jobdir.folder import JobDir  # noqa: E402
from sdlocal.launcher.runtime import ProcessRuntime  # noqa: E402
from sdlocal.launcher.s3.endpoint import S3Endpoint  # noqa: E402
from sdlocal.launcher.sampler.sampler import LIVE_CLOSE_INTERVAL_S  # noqa: E402
from sdlocal.launcher.spec.parse import spec_from_request  # noqa: E402


def _moto() -> tuple[Any, str]:
    import logging
    import socket

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval-ms", type=int, default=500)
    ap.add_argument("--upload-interval", type=float, default=1.0)
    args = ap.parse_args(argv)

    import boto3

    server, url = _moto()
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="bench", aws_secret_access_key="bench")
    client.create_bucket(Bucket="bench")
    first_seen: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            resp = client.list_objects_v2(Bucket="bench", Prefix="out/bench/profiler-output/system/incremental/")
            now = time.time()
            for obj in resp.get("Contents", []):
                first_seen.setdefault(obj["Key"], now)

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.py").write_text(f"import time\ntime.sleep({args.seconds})\n")
        spec = spec_from_request({
            "TrainingJobName": "bench", "EntryPoint": "train.py",
            "ProfilerConfig": {"ProfilingIntervalInMilliseconds": args.interval_ms}},
            base_dir=Path(tmp), default_output_path="s3://bench/out")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.time()
        try:
            run_job(spec, job_dir=JobDir(Path(tmp) / "job"), endpoint=S3Endpoint(url, "flag"), runtime=ProcessRuntime(),
                    options=RunOptions(upload_interval_s=args.upload_interval), echo=lambda _: None, client=client)
        finally:
            done.set()
            watcher.join(5)
        wall = time.time() - started
        oldest, newest, lines = [], [], 0
        for key, seen in first_seen.items():
            body = client.get_object(Bucket="bench", Key=key)["Body"].read().decode()
            stamps = [json.loads(line)["Timestamp"] for line in body.splitlines() if line.strip()]
            lines += len(stamps)
            oldest.append(seen - min(stamps))
            newest.append(seen - max(stamps))
    server.stop()
    if not first_seen or not lines:
        raise SystemExit("no system file reached S3")

    def stats(values: list[float]) -> str:
        values = sorted(values)
        p95 = values[int(0.95 * (len(values) - 1))]
        return f"median {statistics.median(values):.2f} s, p95 {p95:.2f} s, max {values[-1]:.2f} s"

    print(f"System metrics every {args.interval_ms} ms, files closed every {LIVE_CLOSE_INTERVAL_S} s, "
          f"upload every {args.upload_interval:g} s, S3 listed every 0.1 s; job {wall:.0f} s\n")
    print(f"- system files seen in S3 while the job ran: {len(first_seen)} "
          f"({60 * len(first_seen) / args.seconds:.0f} per minute of training), {lines} samples lines")
    print(f"- age of a file's oldest sample when the file appeared: {stats(oldest)}")
    print(f"- age of a file's newest sample when the file appeared: {stats(newest)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
