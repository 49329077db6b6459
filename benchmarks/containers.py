"""The docker runtime measured on the example job, beside the process runtime in the same run:

- time from starting `sdlocal run` to the first rule status object in S3 (each runtime);
- the whole job's wall time (each runtime);
- peak memory of each evaluator container (the cgroup's `max_usage`, read through the Engine API's
  stats while the container runs; the last reading before it exits is the peak);
- the verdicts of both runtimes, which must be equal (exit status 1 if not).

    python benchmarks/containers.py [--steps 60] [--rounds 1] [-p lr=1e5]

Needs the images (`sdlocal images build`) and a Docker engine. A moto server is started for the run.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sample_memory(client: Any, job: str, peaks: dict[str, int], done: threading.Event) -> None:
    """Record the highest cgroup `max_usage` (else `usage`) seen per rule container of `job`."""
    while not done.is_set():
        for container in client.containers.list(filters={"label": [f"sdlocal.job={job}", "sdlocal.role=rule"]}):
            try:
                mem = container.stats(stream=False).get("memory_stats") or {}
            except Exception:  # noqa: BLE001 - the container exited between list and stats
                continue
            peak = int(mem.get("max_usage") or mem.get("usage") or 0)
            rule = container.labels.get("sdlocal.rule", container.name)
            peaks[rule] = max(peaks.get(rule, 0), peak)
        time.sleep(0.2)


def _run_job(runtime: str, steps: int, endpoint: str, home: Path, s3: Any, docker_client: Any,
             params: list[str]) -> dict[str, Any]:
    job = f"bench-{runtime}-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "SDLOCAL_HOME": str(home)}
    cmd = [sys.executable, "-m", "sdlocal", "run", "examples/job.yaml", "--job-name", job, "-p", f"steps={steps}",
           "--runtime", runtime, "--s3-endpoint-url", endpoint, "--json"]
    for param in params:
        cmd += ["-p", param]
    peaks: dict[str, int] = {}
    done = threading.Event()
    sampler = None
    if docker_client is not None:
        sampler = threading.Thread(target=_sample_memory, args=(docker_client, job, peaks, done), daemon=True)
        sampler.start()
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_status = None
    try:
        while proc.poll() is None and first_status is None:
            listed = s3.list_objects_v2(Bucket="sdlocal", Prefix=f"jobs/{job}/rule-output/")
            if any(o["Key"].endswith("/status.json") for o in listed.get("Contents", [])):
                first_status = time.monotonic() - started
            else:
                time.sleep(0.05)
        out, err = proc.communicate(timeout=600)
        wall = time.monotonic() - started
    finally:  # a timeout or Ctrl-C: SIGTERM makes `sdlocal run` stop the job and remove its containers
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=120)
        done.set()
        if sampler is not None:
            sampler.join(5)
    if proc.returncode != 0:
        raise SystemExit(f"{runtime} run failed ({proc.returncode}): {err.strip().splitlines()[-1:]}")
    verdicts = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in json.loads(out)}
    return {"runtime": runtime, "job": job, "first_status_s": first_status, "wall_s": wall,
            "verdicts": verdicts, "evaluator_peak_mib": {k: v / 2**20 for k, v in sorted(peaks.items())}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps of the example job")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each runtime (alternating)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="K=V",
                        help="a hyperparameter of the example job, e.g. lr=1e5 (ExplodingTensor fires)")
    args = parser.parse_args(argv)

    import boto3
    import docker
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not one line per S3 request above the table
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="sdlocal")
    client = docker.from_env(timeout=60)
    results = []
    try:
        with tempfile.TemporaryDirectory() as home:
            for _ in range(args.rounds):
                for runtime in ("docker", "process"):
                    results.append(_run_job(runtime, args.steps, endpoint, Path(home), s3,
                                            client if runtime == "docker" else None, args.param))
    finally:
        client.close()
        server.stop()

    print("| runtime | first rule status (s) | job wall (s) | evaluator peak memory (MiB) | verdicts |")
    print("|---|---|---|---|---|")
    for r in results:
        peaks = ", ".join(f"{k} {v:.0f}" for k, v in r["evaluator_peak_mib"].items()) or "-"
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        print(f"| {r['runtime']} | {r['first_status_s']:.1f} | {r['wall_s']:.1f} | {peaks} | {verdicts} |")
    same = len({json.dumps(r["verdicts"], sort_keys=True) for r in results}) == 1
    print(f"\nverdicts equal across runtimes: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
