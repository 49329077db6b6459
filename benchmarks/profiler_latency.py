"""How closely a profiler rule's verdict follows the data it needs, with the embedded S3.
Target: within 2 s.

    python benchmarks/profiler_latency.py [--rounds 10] [--poll-interval 1.0] [--quick]

The embedded S3 runs as `sdlocal run` runs it (`python -m sdlocal.launcher.s3.server`, its own process);
`python -m sdlocal.evaluator` runs as a job's evaluator does, with `SDLOCAL_POLL_INTERVAL_S` = sdlocal
run's default (1.0 s). This script plays the sampler, the hook and the platform: it writes system
files (500 ms samples, a file closed every second) and trace files, and uploads each closed file
at once. Each round starts healthy; then comes the fault, and the latency is the time from the
PUT that completed the data the verdict needs (the first file from which the rule fires, known by
construction) to the moment `status.json` in S3 reads IssuesFound (read every 20 ms). The job
starts at a random phase of the evaluator's polling (seeded): the latency is then spread between
one refresh and one polling interval plus one refresh, the worst case.

Scenarios (each a fresh job prefix and evaluator per round):
- LowGPUUtilization (patience 0, window 1): GPU at 90 %, then 3 %: the first low sample fires it;
- ProfilerReport (LowGPUUtilization_patience=0, LowGPUUtilization_window=1): the same fault seen
  through all eleven rules (and their eleven JSON reports);
- StepOutlier (defaults): one trace file of 150 steps of 0.1 s, then one with 11 steps of 1 s.
Also reported: the evaluator's CPU time per second of wall time while it follows the job (from
its first status on: its start-up, about a second of imports, is left out).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import boto3  # noqa: E402

from sdlocal.trial.profiler import Sample, SystemMetricsWriter, TraceWriter  # noqa: E402
from sdlocal.trial.profiler.names import (  # noqa: E402
    CPU_TYPE,
    CPU_UTILIZATION,
    GPU_MEMORY_UTILIZATION,
    GPU_TYPE,
    GPU_UTILIZATION,
)  # noqa: E402

BUCKET = "bench"
STATUS_READ_S = 0.02
TARGET_S = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_s3() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal.launcher.s3.server", "--port", str(port)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, url
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the embedded S3 did not start") from None
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Round:
    """One job: its prefix, local folder, evaluator process and uploads."""

    def __init__(self, client: Any, url: str, rule_parameters: dict[str, str], poll_s: float, tmp: Path) -> None:
        self.client = client
        self.prefix = f"jobs/{uuid.uuid4().hex[:10]}"
        self.local = tmp / self.prefix
        self.uploaded: set[Path] = set()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SDLOCAL_")}
        env.update({
            "PYTHONPATH": str(REPO), "AWS_ENDPOINT_URL_S3": url, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1", "SDLOCAL_JOB_NAME": "bench", "SDLOCAL_RULE_CONFIGURATION_NAME": "R",
            "SDLOCAL_RULE_PARAMETERS": json.dumps(rule_parameters), "SDLOCAL_POLL_INTERVAL_S": str(poll_s),
            "SDLOCAL_DEBUG_OUTPUT": f"s3://{BUCKET}/{self.prefix}/debug-output",
            "SDLOCAL_PROFILER_OUTPUT": f"s3://{BUCKET}/{self.prefix}/profiler-output",
            "SDLOCAL_RULE_OUTPUT": f"s3://{BUCKET}/{self.prefix}/rule-output/R",
        })
        self.proc = subprocess.Popen([sys.executable, "-m", "sdlocal.evaluator"], cwd=REPO, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.started = time.monotonic()
        self.cpu_at_start = 0.0

    def following(self, phase_s: float) -> None:
        """The evaluator is up (InProgress written): its CPU is counted from here (not its imports).
        It polls right after writing InProgress, then every interval: the job starts `phase_s` later
        so that uploads do not always land just after a poll (a random phase per round)."""
        self.wait_status("InProgress", 60)
        self.started = time.monotonic()
        self.cpu_at_start = cpu_seconds(self.proc.pid)
        time.sleep(phase_s)

    def status(self) -> str | None:
        try:
            body = self.client.get_object(Bucket=BUCKET, Key=f"{self.prefix}/rule-output/R/status.json")["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        return str(json.loads(body)["RuleEvaluationStatus"])

    def wait_status(self, wanted: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status() == wanted:
                return time.monotonic()
            time.sleep(STATUS_READ_S)
        raise SystemExit(f"{self.prefix}: no {wanted} within {timeout:g} s ({self.status()})")

    def upload(self) -> float:
        """PUT every closed file not yet uploaded; the time the last PUT completed."""
        for path in sorted(self.local.rglob("*.json")):
            if path not in self.uploaded:
                self.uploaded.add(path)
                key = f"{self.prefix}/profiler-output/{path.relative_to(self.local).as_posix()}"
                self.client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
        return time.monotonic()

    def finish(self) -> float:
        """End the job; the evaluator's CPU seconds per wall second while it ran."""
        cpu = cpu_seconds(self.proc.pid) - self.cpu_at_start
        wall = time.monotonic() - self.started
        self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/profiler-output/system/training_job_end.ts", Body=b"")
        try:
            code = self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        if code != 0:
            raise SystemExit(f"evaluator exited {code}: {self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ''}")
        return cpu / wall


def gpu_fault_round(rnd: Round, healthy_s: int, phase_s: float) -> float:
    writer = SystemMetricsWriter(rnd.local, close_interval_s=1)
    rnd.following(phase_s)
    start, wall0 = time.monotonic(), float(int(time.time()))
    seconds = 0

    def second(gpu: float) -> float:
        """A second of samples (two), its file closed and uploaded; then wait for the next second
        of the job's own schedule (not the wall clock's, so that the phase stays random)."""
        nonlocal seconds
        time.sleep(max(0.0, start + seconds - time.monotonic()))  # before, not after: the fault's
        for half in (0.0, 0.5):                                   # upload is timed right away
            writer.write([Sample(CPU_TYPE, f"cpu{i}", CPU_UTILIZATION, 30.0) for i in range(2)]
                         + [Sample(GPU_TYPE, "gpu0", GPU_UTILIZATION, gpu), Sample(GPU_TYPE, "gpu0", GPU_MEMORY_UTILIZATION, 40.0)],
                         timestamp=wall0 + seconds + half)
        writer.close()
        put = rnd.upload()
        seconds += 1
        return put

    for _ in range(healthy_s):
        second(90.0)
    if rnd.status() != "InProgress":
        raise SystemExit(f"fired on healthy data: {rnd.status()}")
    put = second(3.0)
    return rnd.wait_status("IssuesFound", 30) - put


def step_outlier_round(rnd: Round, healthy_s: int, phase_s: float) -> float:
    t0 = int(time.time() * 1e6)
    writer = TraceWriter(rnd.local, "0-algo-1", start_time_us=t0)
    rnd.following(phase_s)
    t = t0
    for i in range(150):
        writer.record_step("TRAIN", i, t, t + 100_000)
        t += 100_000
    writer.flush()
    rnd.upload()
    time.sleep(healthy_s)
    if rnd.status() != "InProgress":
        raise SystemExit(f"fired on healthy data: {rnd.status()}")
    for i in range(150, 161):
        writer.record_step("TRAIN", i, t, t + 1_000_000)
        t += 1_000_000
    writer.flush()
    put = rnd.upload()
    return rnd.wait_status("IssuesFound", 30) - put


SCENARIOS: dict[str, tuple[dict[str, str], Callable[[Round, int, float], float]]] = {
    "LowGPUUtilization": ({"rule_to_invoke": "LowGPUUtilization", "patience": "0", "window": "1"}, gpu_fault_round),
    "ProfilerReport": ({"rule_to_invoke": "ProfilerReport", "LowGPUUtilization_patience": "0",
                        "LowGPUUtilization_window": "1"}, gpu_fault_round),
    "StepOutlier": ({"rule_to_invoke": "StepOutlier"}, step_outlier_round),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--poll-interval", type=float, default=1.0, help="SDLOCAL_POLL_INTERVAL_S (sdlocal run: 1.0)")
    parser.add_argument("--healthy-seconds", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="one round each, 3 healthy seconds")
    parser.add_argument("--seed", type=int, default=0, help="of the rounds' random phases")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)")
    args = parser.parse_args(argv)
    rounds, healthy = (1, 3) if args.quick else (args.rounds, args.healthy_seconds)
    rng = random.Random(args.seed)
    s3, url = start_s3()
    results: dict[str, Any] = {}
    try:
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                              aws_secret_access_key="x")
        client.create_bucket(Bucket=BUCKET)
        with tempfile.TemporaryDirectory(prefix="sdlocal-bench-") as tmp:
            for name, (params, play) in SCENARIOS.items():
                if args.scenario and name not in args.scenario:
                    continue
                latencies, cpu = [], []
                for _ in range(rounds):
                    rnd = Round(client, url, params, args.poll_interval, Path(tmp))
                    try:
                        latencies.append(play(rnd, healthy, rng.uniform(0.0, args.poll_interval)))
                    finally:
                        cpu.append(rnd.finish())
                results[name] = {"latency_s": latencies, "median_s": statistics.median(latencies),
                                 "max_s": max(latencies), "evaluator_cpu_share": statistics.median(cpu)}
    finally:
        s3.terminate()
        s3.wait(timeout=30)
    print(f"Profiler rule verdict latency, embedded S3, poll interval {args.poll_interval:g} s, {rounds} round(s)")
    print("| rule | median | max | evaluator CPU (share of a core) |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['median_s']:.2f} s | {r['max_s']:.2f} s | {100 * r['evaluator_cpu_share']:.1f} % |")
    worst = max(r["max_s"] for r in results.values())
    print(f"target: within {TARGET_S:g} s -> {'met' if worst <= TARGET_S else 'NOT met'} (worst {worst:.2f} s)")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
