"""benchmarks/s3_read.py end to end in quick mode (both servers, our reader and the facade, and the
facade of a second checkout), and the PYTHONPATH that makes a second checkout's code the one a
baseline run imports. No timing is asserted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.settings import baseline_pythonpath  # noqa: E402


def _checkout_copy(dest: Path, marker: str) -> Path:
    for name in ("sdlocal", "compat"):
        shutil.copytree(REPO_ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("trial", "hook", "evaluator", "launcher"):  # the root's symlinks into sdlocal/
        (dest / name).symlink_to((REPO_ROOT / name).readlink())
    with open(dest / "sdlocal" / "trial" / "__init__.py", "a") as f:
        f.write(f"\nBASELINE_MARKER = {marker!r}\n")
    return dest


def test_a_baseline_checkout_is_the_one_imported(tmp_path: Path) -> None:
    other = _checkout_copy(tmp_path / "other", "other")
    path = baseline_pythonpath(other, tmp_path / "work")
    out = subprocess.run([sys.executable, "-c", "import sdlocal.trial as t, sdlocal.hook as h, smdebug as s; "
                          "print(t.BASELINE_MARKER, h.__file__, s.__file__)"],
                         env={**os.environ, "PYTHONPATH": path}, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    marker, hook_file, facade_file = out.stdout.split()
    assert marker == "other"
    assert os.path.realpath(hook_file).startswith(str(other)) and os.path.realpath(facade_file).startswith(str(other))
    # with the package a folder of the checkout (sdlocal/), its root alone on PYTHONPATH is enough too;
    # a checkout of the older layout (packages at the root, mapped by an import finder) needs the helper
    plain = subprocess.run([sys.executable, "-c", "import sdlocal.trial as t; print(t.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(other)}, cwd=tmp_path, capture_output=True, text=True)
    assert os.path.realpath(plain.stdout.strip()).startswith(str(other))


@pytest.mark.slow
def test_quick_run(tmp_path: Path) -> None:
    other = _checkout_copy(tmp_path / "other", "other")
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "s3_read.py"), "--quick", "--no-smdebug",
                           "--baseline-root", str(other), "--work-dir", str(tmp_path / "work")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    runs = result["runs"]
    assert {(r["server"], r["variant"]) for r in runs} == {
        (s, v) for s in ("ranged", "whole") for v in ("ours", "facade", "facade-baseline")}
    for r in runs:
        if r["writer"] == "ours":
            assert r["values"] == 2 * result["steps"] and r["bytes"] > result["steps"] * result["rows"] * result["cols"] * 4
        else:  # our hook's trial (quick: 3 steps of 13 tensors), as rules read it
            assert r["writer"] == "hook" and r["values"] == 3 * 13
    assert {r["writer"] for r in runs} == {"ours", "hook"}
    assert "| trial by | reader | server |" in proc.stdout
    # small values (quick: 3 steps x 49 tensors), every reader, each read checked against the local read
    small = result["small_runs"]
    assert {r["variant"] for r in small} == {"ours", "facade", "facade-baseline"}
    assert all(r["values"] == 3 * 49 and r["writer"] == "ours" for r in small)
    assert "| trial by | reader | values |" in proc.stdout


@pytest.mark.slow
@pytest.mark.interop
def test_small_values_from_s3_by_smdebug_beside_ours(tmp_path: Path, smdebug_python: Path) -> None:
    """smdebug 1.0.34 reads both writers' small trials from the embedded S3 (through
    AWS_ENDPOINT_URL_S3) and gets the values our reader gets; the report pairs its time with ours."""
    import random

    from benchmarks.s3_read import process_cpu_s, read_small, small_report, start_server

    server, url = start_server(tmp_path / "data", False, tmp_path / "server.log")
    try:
        runs = read_small(1, smdebug_python, tmp_path, {"ranged": (url, lambda: process_cpu_s(server.pid))}, 1,
                          random.Random(0), None)
    finally:
        server.terminate()
        server.wait(30)
    assert {(r["writer"], r["variant"]) for r in runs} >= {
        (w, v) for w in ("ours", "smdebug") for v in ("ours", "facade", "smdebug")}
    assert all(r["values"] == 49 for r in runs)
    assert all(r["slept_s"] > 0.9 for r in runs if r["variant"].startswith("smdebug"))  # it saw the end marker
    text = small_report(runs)
    assert text.count("below 10×") + text.count("met") >= 2
