"""The embedded S3 (`python -m sdlocal.launcher.s3.server --data-dir`) as what it stores grows, beside
moto's in-memory server (the same module without `--data-dir`), in one run.

    python benchmarks/embedded_s3.py [--sizes-gb 0,1,4,10] [--dir DIR | --keep] [--rounds 2]
    python benchmarks/embedded_s3.py --quick      # smoke run: 0 and 20 MB stored, a few objects

For each stored size (ascending, the data folder filled up to it between sizes): jobs of
`--job-mb` each (4 MiB objects and `--small-per-big` 10 KiB ones for each, as a debug output's
index files beside its event files), written through the store's own API (the files and index rows
the server writes; through HTTP the fill would take an hour). Then, per round, each server in
turn (order alternating): a fresh process; start-up = from its spawn to its first answer; a job's
workload: PUT `--puts` 1 MiB objects and `--small` 10 KiB ones, GET each back (compared), LIST the
job's prefix page by page; start-up also to its first S3 answer (moto's own server loads its S3
backend then); resident memory (VmRSS) and its peak (VmHWM) after it. Printed: a
markdown table and the ratios disk / in-memory of PUT and GET throughput (medians over rounds),
then one JSON line. The run fails when a GET returns other bytes or a LIST misses an object.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sdlocal.launcher.s3.store import DiskStore  # noqa: E402

BUCKET = "sdlocal"
MIB = 1024 * 1024


def fill(data_dir: Path, target: int, job_bytes: int, small_per_big: int) -> tuple[int, int]:
    """Store jobs until `target` bytes are stored: (objects, bytes) stored."""
    store = DiskStore(data_dir)
    store.save_bucket(BUCKET, "us-east-1", "123456789012", "aws")
    usage = store.usage()
    big, small = os.urandom(4 * MIB), os.urandom(10 * 1024)
    job = usage.objects  # a fresh name per job
    while usage.bytes < target:
        prefix, stored = f"jobs/stored-{job:07d}/debug-output/", 0
        n = 0
        while stored < job_bytes and usage.bytes + stored < target:
            body = small if n % (small_per_big + 1) else big
            store.save_object(BUCKET, f"{prefix}events/{n:06d}", body, "0" * 32, "2026-01-01T00:00:00+00:00",
                              {"Content-Type": "binary/octet-stream"})
            stored += len(body)
            n += 1
        job += n
        usage = store.usage()
    store.close()
    return usage.objects, usage.bytes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024  # kB -> MiB
    return fields


def one_run(data_dir: Path | None, puts: int, small: int, tag: str) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "sdlocal.launcher.s3.server", "--port", str(port)]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not _answers(url):
            if proc.poll() is not None or time.monotonic() - began > 120:
                raise SystemExit(f"the S3 server ({' '.join(cmd)}) did not start")
            time.sleep(0.02)
        start_s = time.monotonic() - began
        client = boto3.client("s3", endpoint_url=url, aws_access_key_id="bench", aws_secret_access_key="bench",
                              region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
        client.list_buckets()  # moto's own server loads its S3 at the first S3 request: that is its start too
        first_s3_s = time.monotonic() - began
        client.create_bucket(Bucket=BUCKET)
        prefix = f"jobs/current-{tag}/debug-output/"
        bodies = {f"{prefix}big/{i:05d}": os.urandom(MIB) for i in range(puts)}
        bodies.update({f"{prefix}index/{i:05d}.json": os.urandom(10 * 1024) for i in range(small)})
        big = [k for k in bodies if "/big/" in k]
        little = [k for k in bodies if "/index/" in k]
        timed: dict[str, float] = {}
        for name, keys in (("put_big", big), ("put_small", little)):
            t = time.perf_counter()
            for k in keys:
                client.put_object(Bucket=BUCKET, Key=k, Body=bodies[k])
            timed[name] = time.perf_counter() - t
        for name, keys in (("get_big", big), ("get_small", little)):
            t = time.perf_counter()
            for k in keys:
                if client.get_object(Bucket=BUCKET, Key=k)["Body"].read() != bodies[k]:
                    raise SystemExit(f"GET {k} returned other bytes than its PUT")
            timed[name] = time.perf_counter() - t
        t = time.perf_counter()
        listed = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
                  for o in page.get("Contents", [])]
        timed["list"] = time.perf_counter() - t
        if sorted(listed) != sorted(bodies):
            raise SystemExit(f"LIST {prefix} gave {len(listed)} keys, not the {len(bodies)} PUT")
        for k in bodies:  # the job is gone again: the next round's store is the same size
            client.delete_object(Bucket=BUCKET, Key=k)
        memory = _memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "start_s": start_s, "first_s3_s": first_s3_s, "rss_mib": memory["VmRSS"], "peak_rss_mib": memory["VmHWM"],
        "put_mib_s": puts / timed["put_big"], "get_mib_s": puts / timed["get_big"],
        "put_small_per_s": small / timed["put_small"], "get_small_per_s": small / timed["get_small"],
        "list_s": timed["list"],
    }


HEADER = ("| stored | objects | start s: answers / first S3 answer (disk; mem) | RSS MiB (disk / mem) | peak RSS MiB (disk) "
          "| PUT MiB/s (disk / mem) | GET MiB/s (disk / mem) | PUT ratio | GET ratio | small PUT ratio "
          "| small GET ratio | LIST s (disk / mem) |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def _line(row: dict[str, Any]) -> str:
    d, m = row["disk"], row["memory"]
    return (f"| {row['stored_gb']:.2f} GB | {row['objects']} | {d['start_s']:.2f} / {d['first_s3_s']:.2f}; "
            f"{m['start_s']:.2f} / {m['first_s3_s']:.2f} "
            f"| {d['rss_mib']:.0f} / {m['rss_mib']:.0f} | {d['peak_rss_mib']:.0f} "
            f"| {d['put_mib_s']:.1f} / {m['put_mib_s']:.1f} | {d['get_mib_s']:.1f} / {m['get_mib_s']:.1f} "
            f"| {row['put_ratio']:.2f} | {row['get_ratio']:.2f} | {row['put_small_ratio']:.2f} "
            f"| {row['get_small_ratio']:.2f} | {d['list_s']:.2f} / {m['list_s']:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-gb", default="0,1,4,10", help="Stored sizes to measure at, GB (10^9 bytes), ascending.")
    parser.add_argument("--dir", type=Path, default=None,
                        help="The data folder, filled further and kept (default: a new one under /var/tmp, removed after).")
    parser.add_argument("--keep", action="store_true", help="Keep the new data folder (a later run with --dir reuses it).")
    parser.add_argument("--job-mb", type=float, default=100.0, help="Size of each stored job, MB.")
    parser.add_argument("--small-per-big", type=int, default=20, help="Stored 10 KiB objects per 4 MiB one.")
    parser.add_argument("--puts", type=int, default=64, help="1 MiB objects each round PUTs and GETs.")
    parser.add_argument("--small", type=int, default=200, help="10 KiB objects each round PUTs and GETs.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="0 and 0.02 GB stored, 8 + 20 objects, one round.")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes_gb, args.job_mb, args.puts, args.small, args.rounds = "0,0.02", 5.0, 8, 20, 1
    sizes = sorted(float(s) for s in args.sizes_gb.split(","))
    data_dir = args.dir or Path(tempfile.mkdtemp(prefix="sdlocal-s3-bench-", dir="/var/tmp"))
    free = shutil.disk_usage(data_dir.parent if not data_dir.exists() else data_dir).free
    if sizes[-1] * 1e9 > free - 2e9:
        raise SystemExit(f"{sizes[-1]:g} GB does not fit in {data_dir} ({free / 1e9:.1f} GB free): give smaller --sizes-gb")
    rows: list[dict[str, Any]] = []
    print(HEADER, flush=True)
    try:
        for size in sizes:
            t = time.monotonic()
            objects, stored = fill(data_dir, int(size * 1e9), int(args.job_mb * 1e6), args.small_per_big)
            os.sync()  # the fill's write-back would slow the rounds' writes: measured is a store at rest
            print(f"stored {stored / 1e9:.2f} GB in {objects} objects (filled in {time.monotonic() - t:.0f} s)",
                  file=sys.stderr, flush=True)
            runs: dict[str, list[dict[str, Any]]] = {"disk": [], "memory": []}
            for r in range(args.rounds):
                order = ("disk", "memory") if r % 2 == 0 else ("memory", "disk")
                for which in order:
                    runs[which].append(one_run(data_dir if which == "disk" else None, args.puts, args.small, f"{r}"))
            med = {w: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for w, rs in runs.items()}
            rows.append({"stored_gb": stored / 1e9, "objects": objects, **{w: med[w] for w in med},
                         "put_ratio": med["disk"]["put_mib_s"] / med["memory"]["put_mib_s"],
                         "get_ratio": med["disk"]["get_mib_s"] / med["memory"]["get_mib_s"],
                         "put_small_ratio": med["disk"]["put_small_per_s"] / med["memory"]["put_small_per_s"],
                         "get_small_ratio": med["disk"]["get_small_per_s"] / med["memory"]["get_small_per_s"]})
            print(_line(rows[-1]), flush=True)  # each size as it is measured: a long run stopped keeps them
    finally:
        if args.dir is None and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif args.dir is None:
            print(f"kept the data folder {data_dir}", file=sys.stderr)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
