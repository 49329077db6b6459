"""Reads every value of every tensor at every step of a trial, in its own process; prints JSON.

    python read.py --reader ours|smdebug PATH

`ours` uses `trial.create_trial` (system python, repository on PYTHONPATH); `smdebug` uses
`smdebug.trials.create_trial` (the side virtualenv's python). The timed span starts before the
trial is opened and ends after the last value is in memory; the checksum is computed afterwards so
that both readers are timed on reading alone.
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
    try:
        from trial import create_trial
    except ImportError:
        from trial.trial import create_trial
    return create_trial


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reader", choices=("ours", "smdebug"), required=True)
    parser.add_argument("path")
    args = parser.parse_args(argv)

    create_trial = _create_trial(args.reader)
    values: list[Any] = []
    start, cpu_start = time.perf_counter(), time.process_time()
    trial = create_trial(args.path)
    opened = time.perf_counter()
    names = list(trial.tensor_names())
    for name in names:
        tensor = trial.tensor(name)
        for step in tensor.steps():
            values.append(tensor.value(step))
    end, cpu_end = time.perf_counter(), time.process_time()

    checksum = 0.0
    elements = 0
    for value in values:
        array = np.asarray(value)
        checksum += float(np.sum(array, dtype=np.float64))
        elements += int(array.size)
    result = {
        "reader": args.reader,
        "open_s": opened - start,
        "total_s": end - start,
        "cpu_s": cpu_end - cpu_start,
        "tensor_names": len(names),
        "values": len(values),
        "elements": elements,
        "checksum": checksum,
        "python": sys.executable,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
