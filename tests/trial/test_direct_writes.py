"""Large step files written with O_DIRECT (trial/direct_io.py): the same bytes as a buffered write,
read back by our reader and by smdebug 1.0.34's; where it is used (file system, size, the
variable); a file system that refuses O_DIRECT gets a buffered file and no later attempt."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial import Collection, ModeKeys, TrialWriter, create_trial
from sdlocal.trial import direct_io as _direct
from sdlocal.trial.writer import event_key

SMDEBUG_READ = r"""
import sys
import numpy as np
from smdebug.trials import create_trial
tr = create_trial(sys.argv[1])
for step in tr.steps():
    print("ROW", step, repr(float(np.asarray(tr.tensor("w1").value(step), dtype=np.float64).sum())),
          float(tr.tensor("loss").value(step)))
"""
MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684096k
30 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 30 0:40 / /work/scratch\\040space rw - tmpfs tmpfs rw
32 30 0:41 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=a,upperdir=b
"""


def _steps(values: list[np.ndarray], n: int) -> list[list[tuple[str, object]]]:
    return [[(f"w{i}", v + s) for i, v in enumerate(values)] + [("loss", np.float32(s))] for s in range(n)]


def _write(root: Path, mode: str, steps: list[list[tuple[str, object]]], monkeypatch: pytest.MonkeyPatch,
           offset: int = 0) -> list[int]:
    """Writes the steps with SDLOCAL_DIRECT_WRITES=mode; returns the os.open flags of each events
    file (of its last open: the first fails where the step's folder is new)."""
    monkeypatch.setenv(_direct.DIRECT_WRITES_ENV, mode)
    flags: dict[str, int] = {}
    real_open = os.open

    def spy(path: object, fl: int, *args: object, **kwargs: object) -> int:
        if str(path).endswith(".tfevents.tmp"):
            flags[str(path)] = fl
        return real_open(path, fl, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    try:
        w = TrialWriter(root)
        for s, tensors in enumerate(steps):
            w.write_step(s + offset, ModeKeys.TRAIN, s + offset, tensors, wall_time=1.0)  # the same bytes
        w.write_collections([Collection("weights", include_regex=("w.*",)), Collection("losses", include_regex=("loss",))])
        w.write_end_marker()
    finally:
        monkeypatch.setattr(os, "open", real_open)
    return list(flags.values())


def test_direct_and_buffered_files_are_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1.2 MB and 1.6 MB values: records off the 4 KiB grid, lengths that are no multiple of it
    values = [np.random.default_rng(0).standard_normal(300_001).astype(np.float32),
              np.random.default_rng(1).standard_normal((400, 1001)).astype(np.float32)]
    steps = _steps(values, 3)
    direct = _write(tmp_path / "direct", "1", steps, monkeypatch)
    buffered = _write(tmp_path / "buffered", "0", steps, monkeypatch)
    assert all(f & os.O_DIRECT for f in direct) and len(direct) == 3
    assert not any(f & os.O_DIRECT for f in buffered) and len(buffered) == 3
    for s in range(3):
        a = (tmp_path / "direct" / event_key(s, "worker_0")).read_bytes()
        assert a == (tmp_path / "buffered" / event_key(s, "worker_0")).read_bytes()
        assert len(a) % _direct.BLOCK  # cut back to its length, not left rounded up
    assert not list((tmp_path / "direct").rglob("*.tmp"))
    trial = create_trial(str(tmp_path / "direct"))
    for s in range(3):
        np.testing.assert_array_equal(trial.tensor("w1").value(s), values[1] + s)
        assert float(trial.tensor("loss").value(s)) == s


def test_small_files_and_tmpfs_are_written_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _write(tmp_path / "small", "1", _steps([np.ones(1000, np.float32)], 2), monkeypatch)
    assert small == [f for f in small if not f & os.O_DIRECT] and len(small) == 2
    assert _direct.fs_type(Path("/dev/shm/x/y"), MOUNTINFO) == "tmpfs"
    assert _direct.fs_type(Path("/work/scratch space/t"), MOUNTINFO) == "tmpfs"  # \040 is a space
    assert _direct.fs_type(Path("/work/scratch"), MOUNTINFO) == "ext4"  # a prefix of a name is not a mount
    assert _direct.fs_type(Path("/var/lib/docker/overlay2/x/merged/opt/ml"), MOUNTINFO) == "overlay"
    writer = _direct.DirectWriter("auto")
    real = _direct.fs_type(tmp_path)
    assert writer.wanted(tmp_path, 2 << 20) == (real in _direct.DIRECT_FS)
    assert not writer.wanted(tmp_path, _direct.DIRECT_MIN_BYTES - 1)
    assert not _direct.DirectWriter("0").wanted(tmp_path, 2 << 20)
    if Path("/dev/shm").is_dir():
        assert not _direct.DirectWriter("auto").wanted(Path("/dev/shm"), 2 << 20)


def test_a_file_system_refusing_o_direct_gets_buffered_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refusals: list[str] = []
    real_open = os.open

    def refusing(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_DIRECT:
            refusals.append(str(path))
            raise OSError(errno.EINVAL, "Invalid argument", str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setenv(_direct.DIRECT_WRITES_ENV, "1")
    monkeypatch.setattr(os, "open", refusing)
    values = [np.arange(400_000, dtype=np.float32)]
    w = TrialWriter(tmp_path / "t")
    for s, tensors in enumerate(_steps(values, 3)):
        w.write_step(s, ModeKeys.TRAIN, s, tensors)
    monkeypatch.setattr(os, "open", real_open)
    # step 0 refused (then written buffered), steps 1 and 2 not tried again
    assert [Path(r).name for r in refusals] == [event_key(0, "worker_0").split("/")[-1] + ".tmp"]
    trial = create_trial(str(tmp_path / "t"))
    for s in range(3):
        np.testing.assert_array_equal(trial.tensor("w0").value(s), values[0] + s)


@pytest.mark.interop
def test_smdebug_reads_a_trial_written_direct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              smdebug_python: Path) -> None:
    values = [np.ones(300_001, np.float32), np.random.default_rng(2).standard_normal((400, 1001)).astype(np.float32)]
    flags = _write(tmp_path / "t", "1", _steps(values, 3), monkeypatch)
    assert all(f & os.O_DIRECT for f in flags) and len(flags) == 3
    out = subprocess.run([str(smdebug_python), "-c", SMDEBUG_READ, str(tmp_path / "t")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("ROW ")]  # smdebug logs there too
    assert [int(r[0]) for r in rows] == [0, 1, 2]
    for step, total, loss in rows:
        expected = float((values[1] + int(step)).astype(np.float64).sum())
        assert float(total) == pytest.approx(expected, rel=1e-9) and float(loss) == int(step)
