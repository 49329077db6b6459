"""The one way tests run the `sdlocal` command and list S3 keys.

The command runs as a user runs it: a child process (`python -m sdlocal`), with the test's
SDLOCAL_HOME, the process runtime unless told otherwise, and no endpoint variable of the test's own
environment (a test names its S3 with `--s3-endpoint-url`, `env`, or an environment `base` of its own). Each test module's
wrapper adds only what its calls share (its flags, its result shape)."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

SDLOCAL = (sys.executable, "-m", "sdlocal")
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def sdlocal_env(home: Path | None, *, runtime: str | None = "process", env: Mapping[str, str] | None = None,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` as given, or this process's environment without its endpoint variables, with
    SDLOCAL_HOME=`home` and SDLOCAL_RUNTIME=`runtime` (where given), then `env` on top."""
    if base is None:
        out = {k: v for k, v in os.environ.items() if k not in ENDPOINT_VARIABLES}
    else:
        out = dict(base)
    if home is not None:
        out["SDLOCAL_HOME"] = str(home)
    if runtime is not None:
        out["SDLOCAL_RUNTIME"] = runtime
    out.update(env or {})
    return out


def run_sdlocal(*args: str, home: Path | None, cwd: Path = REPO_ROOT, runtime: str | None = "process",
                env: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None,
                timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`sdlocal ARGS` to its end: its exit code, stdout and stderr as text."""
    return subprocess.run([*SDLOCAL, *args], cwd=cwd, env=sdlocal_env(home, runtime=runtime, env=env, base=base),
                          capture_output=True, text=True, timeout=timeout)


def start_sdlocal(*args: str, home: Path | None, cwd: Path = REPO_ROOT, runtime: str | None = "process",
                  env: Mapping[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`sdlocal ARGS` started (stdout and stderr piped unless `popen` says otherwise)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*SDLOCAL, *args], cwd=cwd, env=sdlocal_env(home, runtime=runtime, env=env),
                            text=True, **popen)


def s3_keys(client: Any, bucket: str, prefix: str = "", *, relative: bool = False) -> list[str]:
    """Every key under `prefix` (all pages), in S3's order; `relative`: without the prefix."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    return [k[len(prefix):] for k in keys] if relative else keys


def run_jobs(specs: Mapping[str, Path], home: Path, moto_server: str, runtime: str,
             timeout: float = 900) -> dict[str, dict[str, str]]:
    """`sdlocal run` of each job spec at once (job name -> spec file) on `runtime`, to their ends:
    each job's rule verdicts (RuleConfigurationName -> RuleEvaluationStatus)."""
    import json

    procs = {job: start_sdlocal("run", str(spec), "--job-name", job, "--runtime", runtime,
                                "--s3-endpoint-url", moto_server, "--json", home=home, runtime=None)
             for job, spec in specs.items()}
    verdicts = {}
    for job, proc in procs.items():
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, (job, err[-3000:])
        verdicts[job] = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}
    return verdicts
