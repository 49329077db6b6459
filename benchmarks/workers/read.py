"""Reads every value of every tensor at every step of a trial, in its own process; prints JSON.

    python read.py --reader ours|smdebug PATH

`ours` uses `trial.create_trial` (system python, repository on PYTHONPATH), `facade` sdlocal's
`smdebug.trials.create_trial` (what scripts and notebooks call); `smdebug` uses
`smdebug.trials.create_trial` (the side virtualenv's python). The timed span starts before the
trial is opened and ends after the last value is in memory; the checksum is computed afterwards so
that both readers are timed on reading alone. The checksum pass is timed too (`use_s`): the first
use of every value, where a reader that handed out values whose pages are not yet in place (a
lazily faulted mapping) would pay what it did not pay while reading. `protobuf`: the protobuf
implementation this process runs with (smdebug parses every Event with it).

smdebug's trial sleeps once it sees the end-of-training marker (`time.sleep` of
SMDEBUG_TRAINING_END_DELAY_REFRESH, 1 s by default, before its final refresh). Every `time.sleep`
made inside the timed span is itself timed and reported as `slept_s`; `read_s` = `total_s` -
`slept_s` is the reading work alone. Our reader never sleeps (its `slept_s` is 0, measured the same way).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np


def _create_trial(reader: str) -> Any:
    if reader == "smdebug":
        from smdebug.trials import create_trial

        return create_trial
    if reader == "facade":  # sdlocal through smdebug's API, as scripts, rules and notebooks call it
        from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug

        use_sdlocal_smdebug()
        from smdebug.trials import create_trial as facade_create_trial

        return facade_create_trial
    try:
        from sdlocal.trial import create_trial
    except ImportError:
        from sdlocal.trial.trial import create_trial
    return create_trial


def read_bytes_only(path: str) -> dict[str, Any]:
    """The floor any reader that keeps the values pays: every tensor record's bytes read (through
    the index, as both readers do) into fresh memory of this process, no decoding at all."""
    import glob
    import os

    start, cpu_start = time.perf_counter(), time.process_time()
    kept = []
    for index_file in sorted(glob.glob(os.path.join(path, "index", "*", "*.json"))):
        with open(index_file) as f:
            index = json.load(f)
        with open(os.path.join(path, index["meta"]["event_file_name"]), "rb") as events:
            for payload in index["tensor_payload"]:
                buf = np.empty(payload["length"], dtype=np.uint8)
                events.seek(payload["start_idx"])
                events.readinto(buf)  # type: ignore[arg-type]
                kept.append(buf)
    end, cpu_end = time.perf_counter(), time.process_time()
    return {"reader": "bytes", "open_s": 0.0, "total_s": end - start, "cpu_s": cpu_end - cpu_start,
            "values": len(kept), "bytes": sum(int(b.size) for b in kept), "python": sys.executable}


def _minor_faults() -> int:
    try:
        import resource
    except ImportError:
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _protobuf() -> str:
    try:
        import google.protobuf
        from google.protobuf.internal import api_implementation

        return f"{api_implementation.Type()} {google.protobuf.__version__}"
    except ImportError:
        return "none"


def _time_sleeps() -> list[float]:
    """Wraps time.sleep (smdebug calls it as `time.sleep`) so that every sleep still happens and
    its wall time is added to the returned cell."""
    slept = [0.0]
    real_sleep = time.sleep

    def timed_sleep(seconds: float) -> None:
        began = time.perf_counter()
        try:
            real_sleep(seconds)
        finally:
            slept[0] += time.perf_counter() - began

    time.sleep = timed_sleep
    return slept


def _no_huge_pages() -> None:
    """SDLOCAL_BENCH_THP=off: this process gets no transparent huge pages (prctl
    PR_SET_THP_DISABLE), so fresh memory comes in 4 KiB pages, one fault each, as when the kernel
    has no huge page to give (fragmented memory, a loaded host)."""
    import ctypes
    import os

    if os.environ.get("SDLOCAL_BENCH_THP") != "off":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(41, 1, 0, 0, 0) != 0:  # PR_SET_THP_DISABLE
        raise SystemExit(f"prctl(PR_SET_THP_DISABLE) failed: errno {ctypes.get_errno()}")


def main(argv: list[str] | None = None) -> int:
    _no_huge_pages()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reader", choices=("ours", "facade", "smdebug", "bytes"), required=True)
    parser.add_argument("path")
    args = parser.parse_args(argv)
    if args.reader == "bytes":
        print(json.dumps(read_bytes_only(args.path)), flush=True)
        return 0

    create_trial = _create_trial(args.reader)
    slept = _time_sleeps()
    values: list[Any] = []
    faults_start = _minor_faults()
    start, cpu_start = time.perf_counter(), time.process_time()
    trial = create_trial(args.path)
    opened = time.perf_counter()
    names = list(trial.tensor_names())
    for name in names:
        tensor = trial.tensor(name)
        for step in tensor.steps():
            values.append(tensor.value(step))
    end, cpu_end = time.perf_counter(), time.process_time()
    faults_read = _minor_faults() - faults_start

    checksum = 0.0
    elements = nbytes = 0
    use_start = time.perf_counter()
    for value in values:
        array = np.asarray(value)
        checksum += float(np.sum(array, dtype=np.float64))
        elements += int(array.size)
        nbytes += int(array.nbytes)
    use_s = time.perf_counter() - use_start
    result = {
        "reader": args.reader,
        "open_s": opened - start,
        "total_s": end - start,
        "slept_s": slept[0],
        "read_s": end - start - slept[0],
        "use_s": use_s,
        "minor_faults": faults_read,  # page faults while reading: fresh memory touched, pages mapped
        "protobuf": _protobuf(),
        "cpu_s": cpu_end - cpu_start,
        "tensor_names": len(names),
        "values": len(values),
        "elements": elements,
        "bytes": nbytes,
        "checksum": checksum,
        "python": sys.executable,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
