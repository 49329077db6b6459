"""`python -m sdlocal.hook.algorithms.xgboost [--version 1.7-1]`: SageMaker's built-in XGBoost algorithm
in a job's `/opt/ml` (no user script), as the sagemaker-xgboost container runs it in algorithm mode.

It reads what SageMaker gives the container, at the paths the training toolkit's variables say
(so the process runtime's job folder works as `/opt/ml`): `SM_INPUT_CONFIG_DIR` (hyperparameters.json,
inputdataconfig.json, resourceconfig.json), `SM_CHANNEL_TRAIN` / `SM_CHANNEL_VALIDATION`,
`SM_MODEL_DIR`, `SM_OUTPUT_DIR`, and the Debugger hook config at `SMDEBUG_CONFIG_FILE_PATH`
(each defaulting to its /opt/ml path). The version: `--version`, else `SAGEMAKER_XGBOOST_VERSION`
(the containers' own variable), else 1.7-1.

Out: the evaluation line each round (`[0]#011train-rmse:...#011validation-rmse:...`), the model
as `<model dir>/xgboost-model`, the Debugger tensors where the hook config says. A bad request or
bad data: one line `UserError: <message>` on stderr and in `<output dir>/failure`, exit code 1
(the container wrote `framework error:` and a traceback there).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.hook.algorithms.errors import AlgorithmError, AlgorithmFailure, UserError
from sdlocal.hook.algorithms.xgboost_request import validate_xgboost_request

logger = logging.getLogger("sdlocal.hook.algorithms.xgboost")
DEFAULT_VERSION = "1.7-1"
OPT_ML = "/opt/ml"


@dataclass(frozen=True)
class JobPaths:
    config_dir: Path
    input_dir: Path
    model_dir: Path
    output_dir: Path
    hook_config: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobPaths:
        input_dir = Path(env.get("SM_INPUT_DIR", f"{OPT_ML}/input"))
        config_dir = Path(env.get("SM_INPUT_CONFIG_DIR", str(input_dir / "config")))
        return cls(config_dir=config_dir, input_dir=input_dir,
                   model_dir=Path(env.get("SM_MODEL_DIR", f"{OPT_ML}/model")),
                   output_dir=Path(env.get("SM_OUTPUT_DIR", f"{OPT_ML}/output")),
                   hook_config=Path(env.get("SMDEBUG_CONFIG_FILE_PATH", str(config_dir / "debughookconfig.json"))))

    @property
    def failure_file(self) -> Path:
        return self.output_dir / "failure"


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise AlgorithmError(f"no {what} at {path}") from None
    except (OSError, ValueError) as e:
        raise AlgorithmError(f"cannot read {what} {path}: {e}") from None


def _debug_hook(paths: JobPaths, debugger: bool) -> Any:
    """The built-in Debugger hook from the job's DebugHookConfig (none without one, as the container)."""
    if not paths.hook_config.is_file():
        return None
    if not debugger:
        logger.warning("This XGBoost version has no Debugger hook: the DebugHookConfig saves nothing")
        return None
    from sdlocal.hook.errors import HookError
    from sdlocal.hook.xgboost import Hook

    try:
        hook = Hook.create_from_json_file(paths.hook_config)
    except HookError as e:
        raise UserError(f"Debugger hook config {paths.hook_config}: {e}") from None
    logger.info("Debug hook created from config")
    return hook


def _check_redundancy(train: Path, validation: Path) -> None:
    """The container's warning for same-named, same-sized files in train and validation."""
    if not (train.is_dir() and validation.is_dir()):
        return
    for name in sorted({p.name for p in train.iterdir()} & {p.name for p in validation.iterdir()}):
        a, b = train / name, validation / name
        if a.is_file() and b.is_file() and a.stat().st_size == b.stat().st_size:
            logger.warning("Suspected identical files found. (%s and %s with same size %d bytes). Note: Duplicate "
                           "data in the training set and validation set is usually not intentional and can impair "
                           "the validity of the model evaluation by the validation score.", a, b, b.stat().st_size)


def run(version: str, paths: JobPaths) -> None:
    """The whole training; raises AlgorithmFailure (UserError for the request's or the data's faults)."""
    from sdlocal.hook.algorithms.xgboost_data import channel_path, load_channel, same_width
    from sdlocal.hook.algorithms.xgboost_train import train_job

    hyperparameters = _read_json(paths.config_dir / "hyperparameters.json", "hyperparameters")
    data_config = _read_json(paths.config_dir / "inputdataconfig.json", "input data config")
    resources_file = paths.config_dir / "resourceconfig.json"
    if resources_file.is_file():
        hosts = _read_json(resources_file, "resource config").get("hosts", [])
        if len(hosts) > 1:
            raise UserError(f"{len(hosts)} hosts: sdlocal runs the XGBoost algorithm on one host", "ResourceConfig")
    request = validate_xgboost_request(version, hyperparameters, data_config)
    cfg = dict(request.hyperparameters)
    csv_weights = int(cfg.get("csv_weights", 0))
    train_path = channel_path("train", paths.input_dir)
    val_path = channel_path("validation", paths.input_dir) if "validation" in request.channels else None
    if val_path is not None:
        if train_path == val_path or train_path.name == val_path.name:
            logger.warning("Found same path for training and validation. This is not recommended and results may "
                           "not be correct.")
        else:
            _check_redundancy(train_path, val_path)
    dtrain = load_channel(train_path, request.content_type, csv_weights)
    if dtrain is None:
        raise UserError(f"No data in training channel path {train_path}")
    dval = None
    if val_path is not None:
        dval = load_channel(val_path, request.content_type, csv_weights, width=dtrain.num_col())
        if dval is None:
            raise UserError(f"No data in validation channel path {val_path}")
        same_width(dtrain, dval)
    hook = _debug_hook(paths, request.traits.debugger)
    logger.info("Single node training.")
    try:
        train_job(request.traits, cfg, dtrain, dval, paths.model_dir, hook)
    finally:
        if hook is not None:
            hook.close()


def _write_failure(paths: JobPaths, text: str) -> None:
    try:
        paths.output_dir.mkdir(parents=True, exist_ok=True)
        paths.failure_file.write_text(text + "\n")
    except OSError as e:
        print(f"cannot write the failure file {paths.failure_file}: {e}", file=sys.stderr)


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # a stopped job still closes the hook (its last step, end marker)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog="python -m sdlocal.hook.algorithms.xgboost",
                                     description="SageMaker's built-in XGBoost algorithm, run in a job's /opt/ml")
    parser.add_argument("--version", default=env.get("SAGEMAKER_XGBOOST_VERSION", DEFAULT_VERSION),
                        help="the container version (0.90-1 ... 1.7-1); default 1.7-1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s:%(levelname)s] %(message)s",
                        datefmt="%Y-%m-%d:%H:%M:%S", stream=sys.stdout)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)
    paths = JobPaths.from_env(env)
    logger.info("Running XGBoost Sagemaker in algorithm mode (version %s)", args.version)
    try:
        run(args.version, paths)
    except AlgorithmFailure as e:
        print(e.one_line(), file=sys.stderr, flush=True)
        _write_failure(paths, e.one_line())
        return 1
    except Exception as e:  # noqa: BLE001 - any other failure: the toolkit's "framework error", one line
        logger.exception("Reporting training FAILURE")
        text = f"AlgorithmError: framework error: {type(e).__name__}: {' '.join(str(e).split())}"
        print(text, file=sys.stderr, flush=True)
        _write_failure(paths, text)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
