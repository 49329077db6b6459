"""Large reads from the embedded S3, its ranged GETs read from the stored file beside moto's own way
(the whole object read for every ranged GET), in one run.

    python benchmarks/s3_read.py                   # 8 x 64 MiB values per trial, 3 rounds
    python benchmarks/s3_read.py --quick           # smoke run: 2 x 4 MiB, one round
    python benchmarks/s3_read.py --baseline-root /path/to/older/checkout   # + that checkout's reader

The large trial of benchmarks/reader.py (one float32 weight and the loss per step) is written by
our `TrialWriter` and, when the side virtualenv is there, by smdebug 1.0.34's own hook (whose
records' data lie unaligned in their files), then uploaded to an embedded S3 server
(`python -m sdlocal.launcher.s3.server --data-dir`). A second server serves the same data folder
with `SDLOCAL_S3_WHOLE_RANGES=1` (moto's own ranged GET: "whole"; the first is "ranged"). Each
round, for each trial, every (server, reader) pair in a shuffled order, a fresh process each
(workers/read.py on `s3://...`, the endpoint in `AWS_ENDPOINT_URL_S3`): `ours`
(`sdlocal.trial.create_trial`), `facade` (smdebug's API on sdlocal), and with `--baseline-root`
`facade-baseline` (the facade of another checkout: its client side). `--hook-steps N` adds a
trial of our hook at save_interval 1 on run.py's MLP (13 tensors in one 8.4 MB file per step, what
a rule reads: each value a small part of its object). Every read must give the
values and checksum of the local read of the same trial, else the run fails. Printed: per trial,
server and reader, the median and fastest read time and GB/s (10^9 bytes of values per second),
ranged / whole as the paired ratio (median over rounds of the two servers' times in the same
round), and the CPU time of the reader's process plus the server's during the read (steadier than
wall time on a loaded machine); then one JSON line.

Small values (`--small-steps`, default 20): the small trial of benchmarks/reader.py (49 tensors of
at most 32x32 floats per step file), written by each writer and uploaded to the ranged server (and
LocalStack, `--localstack`), is read from each every round by `ours`, `facade`, `facade-baseline` (with `--baseline-root`), `smdebug` (the
side virtualenv, pure-Python protobuf) and `smdebug-fast` (smdebug on upb, where
`benchmarks/smdebug_upb.py --make` made its virtualenv), each finding the server through
AWS_ENDPOINT_URL_S3; printed: each smdebug reader's time ÷ ours, paired by round (target 10x).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.errors import BenchmarkError  # noqa: E402
from benchmarks.run import REPO_ROOT, pick_work_dir, run_worker  # noqa: E402
from benchmarks.settings import baseline_pythonpath, our_python, smdebug_fast_python, smdebug_python  # noqa: E402

BUCKET = "sdlocal-bench"
LOCALSTACK_IMAGE = "sdlocal-localstack:4.14.0"  # localstack/build-image
SMALL_READERS = ("ours", "facade", "facade-baseline", "smdebug", "smdebug-fast")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, whole: bool, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    import urllib.request

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("SDLOCAL_S3_WHOLE_RANGES", None)
    if whole:
        env["SDLOCAL_S3_WHOLE_RANGES"] = "1"
    out = open(log, "ab")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal.launcher.s3.server", "--port", str(port),
                             "--data-dir", str(data_dir)], cwd=REPO_ROOT, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchmarkError(f"the embedded S3 did not start (see {log})") from None
            time.sleep(0.1)


def upload(url: str, trial: Path, prefix: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=url, aws_access_key_id="bench", aws_secret_access_key="bench",
                          region_name="us-east-1")
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for path in sorted(p for p in trial.rglob("*") if p.is_file()):
        client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(trial).as_posix()}")


def start_localstack(image: str) -> tuple[str, str, int]:
    """A LocalStack container of `image` serving S3 on a free local port: (container id, its URL,
    the host pid of its main process), once its health check says S3 is up."""
    import urllib.request

    port = _free_port()
    proc = subprocess.run(["docker", "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:4566", "-e", "SERVICES=s3",
                           "-e", "EAGER_SERVICE_LOADING=1", image], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchmarkError(f"LocalStack ({image}) did not start: {proc.stderr.strip()[-300:]}")
    container, url = proc.stdout.strip(), f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_localstack/health", timeout=2) as answer:
                if json.load(answer).get("services", {}).get("s3") in ("available", "running"):
                    break
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
            raise BenchmarkError(f"LocalStack ({image}) did not answer on {url} within 180 s")
        time.sleep(0.5)
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True, text=True,
                         check=True).stdout.strip()
    return container, url, int(pid)


def cgroup_cpu_s(pid: int) -> float:
    """CPU time of the control group of `pid` (a container: every process in it), cgroup v1's
    cpuacct or v2's cpu.stat."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return int(Path(f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage").read_text()) / 1e9
        if number == "0" and Path(f"/sys/fs/cgroup{path}/cpu.stat").exists():
            stat = dict(ln.split() for ln in Path(f"/sys/fs/cgroup{path}/cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
    raise BenchmarkError(f"no CPU accounting found for the control group of pid {pid}")


def process_cpu_s(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read(reader: str, path: str, url: str | None, baseline: str | None,
         smdebugs: dict[str, Path] | None = None) -> dict[str, Any]:
    """One read of every value by `reader` in a fresh process (workers/read.py). `smdebugs`: the
    pythons of the smdebug readers ("smdebug", "smdebug-fast"), which find the server through
    AWS_ENDPOINT_URL_S3 as boto3 does."""
    extra = dict(CREDENTIALS)
    if url is not None:
        extra["AWS_ENDPOINT_URL_S3"] = url
    if smdebugs and reader in smdebugs:
        return run_worker(smdebugs[reader], "read.py", ["--reader", "smdebug", path], "smdebug", 1800, extra_env=extra)
    if reader.endswith("-baseline"):
        assert baseline is not None
        extra["PYTHONPATH"] = baseline
    return run_worker(our_python(), "read.py", ["--reader", reader.removesuffix("-baseline"), path], "ours", 900,
                      extra_env=extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, help="values of the large weight per trial (default 8; quick 2)")
    parser.add_argument("--rows", type=int, help="default 4096 (quick 1024)")
    parser.add_argument("--cols", type=int, help="default 4096 (quick 1024)")
    parser.add_argument("--rounds", type=int, help="default 3 (quick 1)")
    parser.add_argument("--no-smdebug", action="store_true", help="only our writer's trial")
    parser.add_argument("--smdebug-python", help="the side virtualenv's python (smdebug's writer)")
    parser.add_argument("--baseline-root", type=Path, help="another checkout: its facade reads too")
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small-steps", type=int,
                        help="small values too: the small trial of benchmarks/reader.py (49 tensors of at most 32x32"
                             " floats per step file), this many steps per writer, read by ours, the facade, smdebug and"
                             " smdebug-fast from the ranged server and LocalStack (default 20; quick 3; 0: none)")
    parser.add_argument("--localstack", nargs="?", const=LOCALSTACK_IMAGE, metavar="IMAGE",
                        help="also read from a LocalStack container (a Docker engine; default image"
                             f" {LOCALSTACK_IMAGE}, built by localstack/build-image): large and small values")
    parser.add_argument("--hook-steps", type=int,
                        help="also a trial of our hook at save_interval 1 on run.py's MLP (13 tensors, 8.4 MB per"
                             " step file, as rules read it): this many steps (default 0: none; quick 3)")
    args = parser.parse_args(argv)
    steps = args.steps or (2 if args.quick else 8)
    rows = args.rows or (1024 if args.quick else 4096)
    cols = args.cols or (1024 if args.quick else 4096)
    rounds = args.rounds or (1 if args.quick else 3)
    side = None if args.no_smdebug else smdebug_python(args.smdebug_python)
    work, where = pick_work_dir(args.work_dir)
    print(f"work folder: {work} ({where}); {steps} x {rows * cols * 4 / 2**20:.0f} MiB values per trial, {rounds} rounds")
    servers: list[subprocess.Popen[bytes]] = []
    localstack: str | None = None
    try:
        trials: dict[str, Path] = {}
        for writer in ["ours"] + (["smdebug"] if side is not None else []):
            out = work / f"large-{writer}"
            run_worker(side if writer == "smdebug" else our_python(), "write_trial.py",  # type: ignore[arg-type]
                       ["--writer", writer, "--workload", "large", "--steps", str(steps), "--rows", str(rows),
                        "--cols", str(cols), "--out-dir", str(out)], writer, 900)
            trials[writer] = out
        hook_steps = args.hook_steps if args.hook_steps is not None else (3 if args.quick else 0)
        if hook_steps:  # several tensors per step file: a value is a small part of its object
            out = work / "hook-ours"
            run_worker(our_python(), "train.py", ["--variant", "ours", "--interval", "1", "--steps", str(hook_steps),
                                                  "--warmup", "0", "--out-dir", str(out)], "ours", 900)
            trials["hook"] = out
        ranged, ranged_url = start_server(work / "s3-data", False, work / "s3-ranged.log")
        servers.append(ranged)
        for writer, trial in trials.items():
            upload(ranged_url, trial, writer)
        whole, whole_url = start_server(work / "s3-data", True, work / "s3-whole.log")
        servers.append(whole)
        urls = {"ranged": ranged_url, "whole": whole_url}
        cpu_of = {"ranged": lambda: process_cpu_s(ranged.pid), "whole": lambda: process_cpu_s(whole.pid)}
        if args.localstack:
            localstack, urls["localstack"], localstack_pid = start_localstack(args.localstack)
            cpu_of["localstack"] = lambda: cgroup_cpu_s(localstack_pid)
            for writer, trial in trials.items():
                upload(urls["localstack"], trial, writer)
        readers = ["ours", "facade"] + (["facade-baseline"] if args.baseline_root else [])
        baseline = baseline_pythonpath(args.baseline_root, work) if args.baseline_root else None
        local = {w: read("ours", str(t), None, None) for w, t in trials.items()}
        rng = random.Random(args.seed)
        runs: list[dict[str, Any]] = []
        for round_no in range(rounds):
            for writer in trials:
                pairs = [(s, r) for s in urls for r in readers]
                rng.shuffle(pairs)
                for server, reader in pairs:
                    server_cpu = cpu_of[server]()
                    got = read(reader, f"s3://{BUCKET}/{writer}", urls[server], baseline)
                    got["server_cpu_s"] = cpu_of[server]() - server_cpu
                    want = local[writer]
                    if (got["values"], got["elements"], got["checksum"]) != (want["values"], want["elements"],
                                                                              want["checksum"]):
                        raise BenchmarkError(f"{reader} via {server} read other values from {writer}'s trial")
                    got.update(writer=writer, server=server, variant=reader, round=round_no)
                    runs.append(got)
                    print(f"  round {round_no + 1}/{rounds} {writer:<7} {server:<10} {reader:<15}"
                          f" {got['read_s']:7.3f} s  {got['bytes'] / got['read_s'] / 1e9:6.3f} GB/s"
                          f"  CPU reader {got['cpu_s']:.2f} s, server {got['server_cpu_s']:.2f} s", flush=True)
        print(report(runs, trials, readers))
        small_steps = args.small_steps if args.small_steps is not None else (3 if args.quick else 20)
        small_servers = {name: (urls[name], cpu_of[name]) for name in ("ranged", "localstack") if name in urls}
        small_runs = read_small(small_steps, side, work, small_servers, rounds, rng, baseline) if small_steps else []
        if small_runs:
            print(small_report(small_runs))
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} cores)")
        print(json.dumps({"runs": runs, "small_runs": small_runs, "load_average": load, "steps": steps, "rows": rows,
                          "cols": cols, "small_steps": small_steps}))
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(30)
        if localstack is not None:
            subprocess.run(["docker", "rm", "-f", localstack], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def read_small(steps: int, side: Path | None, work: Path, servers: dict[str, tuple[str, Callable[[], float]]],
               rounds: int, rng: random.Random, baseline: str | None) -> list[dict[str, Any]]:
    """Small values from S3: the small trial by each writer, uploaded to each server (name: its URL
    and its CPU time so far), every value read by each reader from each server each round in a
    shuffled order; each read checked against the local one."""
    smdebugs = {"smdebug": side} if side is not None else {}
    fast = smdebug_fast_python() if side is not None else None
    if fast is not None:
        smdebugs["smdebug-fast"] = fast
    readers = ["ours", "facade"] + (["facade-baseline"] if baseline else []) + list(smdebugs)
    trials = {}
    for writer in ["ours"] + (["smdebug"] if side is not None else []):
        out = work / f"small-{writer}"
        run_worker(side if writer == "smdebug" else our_python(), "write_trial.py",  # type: ignore[arg-type]
                   ["--writer", writer, "--workload", "small", "--steps", str(steps), "--out-dir", str(out)], writer, 900)
        for url, _ in servers.values():
            upload(url, out, f"small-{writer}")
        trials[writer] = read("ours", str(out), None, None)
    print(f"small values from S3: {steps} steps x 49 tensors per trial, readers: {', '.join(readers)}", flush=True)
    runs: list[dict[str, Any]] = []
    for round_no in range(rounds):
        triples = [(s, w, r) for s in servers for w in trials for r in readers]
        rng.shuffle(triples)
        for server, writer, reader in triples:
            url, server_cpu_s = servers[server]
            server_cpu = server_cpu_s()
            got = read(reader, f"s3://{BUCKET}/small-{writer}", url, baseline, smdebugs)
            got["server_cpu_s"] = server_cpu_s() - server_cpu
            want = trials[writer]
            if (got["values"], got["elements"]) != (want["values"], want["elements"]) or not math.isclose(
                    got["checksum"], want["checksum"], rel_tol=1e-9):
                raise BenchmarkError(f"{reader} read other small values from {writer}'s trial on S3")
            got.update(writer=writer, server=server, variant=reader, round=round_no)
            runs.append(got)
            print(f"  round {round_no + 1}/{rounds} small {writer:<7} {server:<10} {reader:<15} {got['read_s']:7.3f} s"
                  f"  CPU reader {got['cpu_s']:.2f} s, server {got['server_cpu_s']:.2f} s", flush=True)
    return runs


def small_report(runs: list[dict[str, Any]]) -> str:
    """Per trial and reader: median and fastest read time, CPU; each smdebug reader's time ÷ ours,
    paired by round (median over rounds), against the target of 10x."""
    lines = ["| server | trial by | reader | values | median s | fastest s | CPU s reader + server (median) |"
             " ÷ ours, paired (smdebug readers) |", "|---|---|---|---|---|---|---|---|"]
    for server, writer in dict.fromkeys((r["server"], r["writer"]) for r in runs):
        mine = [r for r in runs if r["writer"] == writer and r["server"] == server]
        ours = {r["round"]: r["read_s"] for r in mine if r["variant"] == "ours"}
        for reader in [r for r in SMALL_READERS if any(m["variant"] == r for m in mine)]:
            theirs = [r for r in mine if r["variant"] == reader]
            t = [r["read_s"] for r in theirs]
            ratio = ""
            if reader.startswith("smdebug"):
                paired = statistics.median(r["read_s"] / ours[r["round"]] for r in theirs)
                ratio = f"{paired:.1f}× ({'≥ 10×: met' if paired >= 10 else 'below 10×'})"
            lines.append(f"| {server} | {writer} | {reader} | {theirs[0]['values']} | {statistics.median(t):.3f} | {min(t):.3f} |"
                         f" {statistics.median(r['cpu_s'] + r['server_cpu_s'] for r in theirs):.2f} | {ratio} |")
    return "\n".join(lines)


def report(runs: list[dict[str, Any]], trials: dict[str, Path], readers: list[str]) -> str:
    lines = ["| trial by | reader | server | median s | fastest s | GB/s (median) | ranged / whole (paired) |"
             " CPU s reader + server (median) |",
             "|---|---|---|---|---|---|---|---|"]
    for writer in trials:
        for reader in readers:
            times: dict[str, dict[int, float]] = {}
            cpu: dict[str, list[float]] = {}
            size = 0
            for r in runs:
                if r["writer"] == writer and r["variant"] == reader:
                    times.setdefault(r["server"], {})[r["round"]] = r["read_s"]
                    cpu.setdefault(r["server"], []).append(r["cpu_s"] + r["server_cpu_s"])
                    size = r["bytes"]
            paired = statistics.median(times["ranged"][k] / times["whole"][k] for k in times["ranged"])
            for server in [name for name in ("whole", "ranged", "localstack") if name in times]:
                t = list(times[server].values())
                lines.append(f"| {writer} | {reader} | {server} | {statistics.median(t):.3f} | {min(t):.3f} |"
                             f" {size / statistics.median(t) / 1e9:.3f} | {f'{paired:.3f}' if server == 'ranged' else ''} |"
                             f" {statistics.median(cpu[server]):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
