"""Long jobs: how far the uploads lag behind the training, the launcher's memory, and how long the
job takes to end after its training, for jobs of growing length; with `--baseline-root`, the same
for another checkout (before/after).

    python benchmarks/long_job.py [--steps 1000,3000] [--baseline-root /path/to/older/checkout]

Each run is a real `sdlocal run` (a subprocess, process runtime, run from the checkout measured)
of examples/train.py with the hook saving every step (`save_interval` 1: an events and an index
file per step) and a ProfilerConfig (system metrics, one file a second), no rule, against a moto
server in a process of its own (the same for every run). Sampled every 0.5 s: the launcher's RSS
(its own process, not the training's); every 2 s: files closed in the job folder (tensors and
profiler, `.tmp` left out) against objects in S3 under the job's prefixes: the lag. "Ends after
training": from the launcher's `Training completed` line (it polls the training every 0.2 s) to its
exit (final upload, end markers, model published). Every closed file must be in S3 at the end, else
the run fails: a fast uploader that skips files measures nothing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.moto_process import MotoProcess  # noqa: E402

SPEC = """\
EntryPoint: train.py
SourceDir: {source}
HyperParameters: {{steps: "{steps}", hidden: "8", layers: "1", batch-size: "8", features: "4", log-every: "500"}}
DebugHookConfig:
  S3OutputPath: s3://{bucket}/jobs
  HookParameters: {{save_interval: "1"}}
  CollectionConfigurations:
    - CollectionName: losses
    - CollectionName: weights
ProfilerConfig:
  S3OutputPath: s3://{bucket}/jobs
  ProfilingIntervalInMilliseconds: 500
"""


@dataclass
class Result:
    root: str
    steps: int
    training_s: float
    end_after_training_s: float
    max_lag: int
    mean_lag: float
    peak_rss_mb: float
    rss_at_half_mb: float
    files: int


def closed_files(job: Path) -> int:
    n = 0
    for sub in ("output/tensors", "output/profiler"):
        for _dirpath, _dirs, files in os.walk(job / sub):
            n += sum(1 for f in files if not f.endswith(".tmp") and f != "training_job_end.ts")
    return n


def s3_objects(client: object, bucket: str, job_name: str) -> int:
    n = 0
    for prefix in (f"jobs/{job_name}/debug-output/", f"jobs/{job_name}/profiler-output/"):
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)  # type: ignore[attr-defined]
        n += sum(1 for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("training_job_end.ts"))
    return n


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_once(root: Path, steps: int, moto: MotoProcess, client: object, tmp: Path, tag: str) -> Result:
    job_name = f"long-{tag}-{steps}-{int(time.time())}"
    # a bucket per run: moto's LIST walks every key of a bucket, so a run must not pay for the last
    bucket = f"bench-{tag}-{steps}-{time.time_ns() % 10**9}"
    client.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    spec = tmp / f"{job_name}.yaml"
    spec.write_text(SPEC.format(source=REPO / "examples", steps=steps, bucket=bucket))
    job_dir = tmp / job_name
    env = {**os.environ, "SDLOCAL_HOME": str(tmp / "home"), "SDLOCAL_RUNTIME": "process",
           "PYTHONPATH": str(root), "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal", "run", str(spec), "--job-name", job_name,
                             "--s3-endpoint-url", moto.url, "--work-dir", str(job_dir)],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss: list[tuple[float, float]] = []
    lags: list[int] = []
    marks: dict[str, float] = {}
    started = time.monotonic()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "Training completed" in line or "Training failed" in line:
                marks.setdefault("trained", time.monotonic())
            if "started (" in line:
                marks.setdefault("started", time.monotonic())
            marks["last_line"] = time.monotonic()
            lines.append(line.rstrip())

    lines: list[str] = []
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    next_lag = time.monotonic()
    while proc.poll() is None:
        value = rss_mb(proc.pid)
        if value is not None:
            rss.append((time.monotonic() - started, value))
        if time.monotonic() >= next_lag and "trained" not in marks:
            lags.append(max(0, closed_files(job_dir) - s3_objects(client, bucket, job_name)))
            next_lag = time.monotonic() + 2.0
        time.sleep(0.5)
    ended = time.monotonic()
    reader.join(10)
    if proc.returncode != 0 or "trained" not in marks:
        raise SystemExit(f"{tag} {steps} steps: sdlocal run failed ({proc.returncode}):\n" + "\n".join(lines[-20:]))
    local, stored = closed_files(job_dir), s3_objects(client, bucket, job_name)
    if local != stored or local < 2 * steps:
        raise SystemExit(f"{tag} {steps} steps: {local} closed files, {stored} in S3")
    training_s = marks["trained"] - marks.get("started", started)
    half = [v for t, v in rss if t <= (marks["trained"] - started) / 2] or [rss[0][1]]
    return Result(tag, steps, training_s, ended - marks["trained"], max(lags or [0]),
                  sum(lags) / max(1, len(lags)), max(v for _, v in rss), half[-1], local)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="1000,3000", help="comma-separated job lengths")
    ap.add_argument("--baseline-root", type=Path, default=None, help="another checkout, measured the same way")
    args = ap.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    roots = [("this", REPO)] + ([("baseline", args.baseline_root.resolve())] if args.baseline_root else [])

    import boto3

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="sdlocal-long-") as tmp_name:
        tmp = Path(tmp_name)
        moto = MotoProcess(log=tmp / "moto.log")
        moto.start()
        try:
            client = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1",
                                  aws_access_key_id="bench", aws_secret_access_key="bench")
            for n in steps:
                for tag, root in roots:
                    r = run_once(root, n, moto, client, tmp, tag)
                    results.append(r)
                    print(f"{tag:8} {n:5} steps: training {r.training_s:5.1f} s, ends {r.end_after_training_s:5.2f} s "
                          f"after it, lag max {r.max_lag} / mean {r.mean_lag:.0f} files, launcher RSS peak "
                          f"{r.peak_rss_mb:.0f} MB (at half-training {r.rss_at_half_mb:.0f} MB), {r.files} files",
                          flush=True)
        finally:
            moto.kill()
    print("\n| checkout | steps | files | training | ends after training | upload lag max / mean | launcher RSS peak (half-way) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.root} | {r.steps} | {r.files} | {r.training_s:.1f} s | {r.end_after_training_s:.2f} s | "
              f"{r.max_lag} / {r.mean_lag:.0f} files | {r.peak_rss_mb:.0f} MB ({r.rss_at_half_mb:.0f} MB) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
