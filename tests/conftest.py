"""Shared fixtures: a real moto S3 server on a loopback port, fixture trials, CI-aware markers."""
from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import boto3
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# Trials written by the real smdebug 1.0.34 hook and SageMaker profiler output samples, kept in the
# repository so a plain clone tests against them (tests/fixtures/*/README or MANIFEST.md).
FIXTURES = REPO_ROOT / "tests" / "fixtures"
FIXTURE_TRIALS = FIXTURES / "smdebug-trials"
FIXTURE_PROFILER = FIXTURES / "smdebug-profiler"
SMDEBUG_PYTHON = Path(
    os.environ.get("SDLOCAL_SMDEBUG_PYTHON", str(REPO_ROOT / ".venv-smdebug" / "bin" / "python"))
)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(message: str) -> NoReturn:
    """What a test needs is not on this machine: under CI=true (.ci/run sets it all up) that is a
    broken run and the test fails; elsewhere the test is skipped."""
    if in_ci():
        pytest.fail(f"CI=true but {message}")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A real moto server (ThreadedMotoServer) for the whole session; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The SDLOCAL_HOME of this session (of this xdist worker, when the suite runs in parallel): its
    running-job records and embedded S3 are never the user's ~/.sdlocal nor another worker's."""
    home = tmp_path_factory.mktemp("sdlocal-home")
    yield home
    from sdlocal.launcher.s3.embedded import EmbeddedS3

    EmbeddedS3(home).stop()  # one a test started through this home


@pytest.fixture(autouse=True)
def _sdlocal_home(_session_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(_session_home))


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never let a test reach real AWS with someone's credentials.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # `sdlocal run` picks docker when images exist (--runtime auto); tests ask for it explicitly.
    monkeypatch.setenv("SDLOCAL_RUNTIME", "process")


@pytest.fixture
def s3_client(moto_server: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")


@pytest.fixture
def bucket(s3_client) -> str:  # type: ignore[no-untyped-def]
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def smdebug_python() -> Path:
    """The side virtualenv's python with the real smdebug 1.0.34 (see .ci/run)."""
    if not SMDEBUG_PYTHON.exists():
        missing(f"smdebug side virtualenv missing at {SMDEBUG_PYTHON}")
    return SMDEBUG_PYTHON


@pytest.fixture
def fixture_trials() -> Path:
    # Missing data is a broken checkout, not a reason to skip.
    assert (FIXTURE_TRIALS / "MANIFEST.md").is_file(), f"fixture trials missing at {FIXTURE_TRIALS}"
    return FIXTURE_TRIALS


@pytest.fixture(scope="session")
def docker_client():  # type: ignore[no-untyped-def]
    """A client of a Docker engine that answers. Without one: skip, or fail under CI=true (CI
    installs and starts dockerd, so a missing engine there is a broken run, not a skipped test)."""
    import docker

    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine answers"
        missing(f"no Docker engine answers: {exc}")
    try:
        yield client
    finally:
        client.close()


# ---- scheduling under pytest-xdist (scripts/test: --dist loadgroup) -------------------------------
# A module- or session-scoped fixture is built once per worker that runs one of its tests: these
# modules and folders build an expensive one (the detection matrix alone is four minutes of training),
# so all of their tests go to one worker, which builds it once (the detection matrix was built on
# four workers at once when the groups were missing: 20 minutes of training).
SHARED_FIXTURE_GROUPS = (
    "tests/detection/test_matrix.py",  # results: every scenario trained and judged
    "tests/compat/test_packaging.py",  # wheel: built from the sdist
    "tests/compat/test_scripts.py",  # runs: smdebug scripts run under the facade
    "tests/algorithms/test_xgboost_debugger.py",  # regression: an XGBoost job
    "tests/evaluator/test_xgboost_rules.py",  # trials: XGBoost trainings
    "tests/evaluator/analysis/",  # profiled_job (its conftest): a profiled job on moto
    "tests/evaluator/reports/",  # cpu_job, gpu_job (its conftest)
)


def _relative(item: pytest.Item) -> str:
    return Path(str(item.path)).resolve().relative_to(REPO_ROOT).as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns the group into the node id's "@group"
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups the tests sharing an expensive fixture (SHARED_FIXTURE_GROUPS). The order stays the
    files' own: long end-to-end tests mostly wait on their jobs, and spread among short ones they
    leave the cores to those (started all first, on every worker at once, they ran 36 minutes
    where the files' order ran 25)."""
    for item in items:
        path = _relative(item)
        group = next((g for g in SHARED_FIXTURE_GROUPS if path == g or path.startswith(g)), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
