"""benchmarks/smdebug_upb.py: smdebug's own `_pb2` modules, rewritten into today's protoc form, load
on protobuf's upb and parse the events files both writers write (the `smdebug-fast` reader's
configuration)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.smdebug_upb import MARK, rewrite, site_packages
from sdlocal.trial import ModeKeys, TrialWriter

PARSE = """
import json, sys
from google.protobuf.internal import api_implementation
from smdebug.core.tfevent.proto import event_pb2, types_pb2
from sdlocal.trial.tfrecord import iter_records
out = {"impl": api_implementation.Type(), "float": types_pb2.DT_FLOAT, "values": {}}
for _, payload in iter_records(open(sys.argv[1], "rb").read()):
    event = event_pb2.Event.FromString(bytes(payload))
    for v in event.summary.value:
        out["values"][v.tag] = [event.step, v.tensor.dtype, [d.size for d in v.tensor.tensor_shape.dim],
                                v.tensor.tensor_content.hex()]
print(json.dumps(out))
"""


def test_rewritten_modules_parse_events_on_upb(smdebug_python: Path, tmp_path: Path) -> None:
    side = site_packages(str(smdebug_python)) / "smdebug"
    package = tmp_path / "pkg"
    proto = package / "smdebug" / "core" / "tfevent" / "proto"
    proto.mkdir(parents=True)
    for folder in (package / "smdebug", package / "smdebug" / "core", package / "smdebug" / "core" / "tfevent", proto):
        (folder / "__init__.py").write_text("")
    originals = sorted((side / "core" / "tfevent" / "proto").glob("*_pb2.py"))
    assert len(originals) >= 9
    for original in originals:
        source = original.read_text()
        if source.startswith(MARK):
            pytest.fail(f"{original} is already rewritten: the tests' smdebug must be as shipped")
        new = rewrite(source, f"smdebug.core.tfevent.proto.{original.stem}")
        assert new.startswith(MARK) and "AddSerializedFile" in new
        (proto / original.name).write_text(new)

    trial = tmp_path / "trial"
    weight = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    TrialWriter(trial).write_step(3, ModeKeys.TRAIN, 3, [("w", weight), ("loss", np.float32(0.25))])
    events = next(trial.rglob("*.tfevents"))
    run = subprocess.run([sys.executable, "-c", PARSE, str(events)], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{package}:{Path(__file__).resolve().parents[2]}", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    parsed = json.loads(run.stdout)
    assert parsed["impl"] == "upb"  # not the pure-Python fallback
    step, dtype, shape, content = parsed["values"]["w"]
    assert (step, dtype, shape) == (3, parsed["float"], [3, 4])
    np.testing.assert_array_equal(np.frombuffer(bytes.fromhex(content), np.float32).reshape(3, 4), weight)
    assert np.frombuffer(bytes.fromhex(parsed["values"]["loss"][3]), np.float32)[0] == np.float32(0.25)


def test_a_module_without_a_serialized_descriptor_is_refused() -> None:
    with pytest.raises(ValueError, match="no DESCRIPTOR"):
        rewrite("DESCRIPTOR = None\n", "smdebug.x_pb2")
