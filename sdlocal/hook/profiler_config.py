"""profilerconfig.json, parsed once into frozen dataclasses (smdebug's profiler_config_parser
semantics, strict where smdebug silently falls back to defaults).

Shape, as SageMaker writes it into the training container (`$SMPROFILER_CONFIG_PATH`, else
/opt/ml/input/config/profilerconfig.json); keys are case-insensitive, values may be strings:

    {"ProfilingParameters": {
        "LocalPath": "/opt/ml/output/profiler",
        "RotateMaxFileSizeInBytes": "10485760", "RotateFileCloseIntervalInSeconds": "60",
        "FileOpenFailThreshold": "50",
        "DataloaderProfilingConfig": "{\"StartStep\": 7, \"NumSteps\": 1, \"MetricsRegex\": \".*\", }",
        "DetailedProfilingConfig": "{\"StartTimeInSecSinceEpoch\": 1700000000, \"Duration\": 5, }",
        "PythonProfilingConfig": "{\"StartStep\": 9, \"NumSteps\": 3, \"ProfilerName\": \"cProfile\", }"},
     "DisableProfiler": false}

The metrics configs are dicts encoded as strings: the SageMaker Python SDK v2 writes Python dict
literals (`{"StartStep": 5, "NumSteps": 1, }`, trailing comma included), which smdebug `eval`s; we
read JSON or, failing that, a Python literal (`ast.literal_eval`, never `eval`). A time range is
`StartTimeInSecSinceEpoch` and `DurationInSeconds` (smdebug's key) or `Duration` (the SDK's).

Enabled (smdebug): the file exists, `DisableProfiler` is not true and `ProfilingParameters` is not
empty. Then the hook records the framework timeline (steps, forward, backward) at every step; the
metrics configs only add their own events in their step or time range. A bad value raises
HookConfigError naming the key (`python -m sdlocal.hook.run` fails before training starts); unknown keys
are logged and ignored, as a SageMaker request may carry keys this hook does not use.
"""
from __future__ import annotations

import ast
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.hook.errors import HookConfigError

logger = logging.getLogger(__name__)

CONFIG_PATH_ENV = "SMPROFILER_CONFIG_PATH"
DEFAULT_CONFIG_PATH = "/opt/ml/input/config/profilerconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/profiler"
MAX_FILE_SIZE_DEFAULT = 10 * 1024 * 1024  # smdebug's and the SDK's defaults
CLOSE_INTERVAL_DEFAULT_S = 60.0
FILE_OPEN_FAIL_THRESHOLD_DEFAULT = 50
PYTHON_PROFILERS = ("cprofile", "pyinstrument")
CPROFILE_TIMERS = ("total_time", "cpu_time", "off_cpu_time", "default")

# Canonical spellings; the file's keys are matched case-insensitively against them.
_TOP_KEYS = ("ProfilingParameters", "DisableProfiler")
_PARAM_KEYS = (
    "LocalPath", "RotateMaxFileSizeInBytes", "RotateFileCloseIntervalInSeconds", "FileOpenFailThreshold",
    "DetailedProfilingConfig", "DataloaderProfilingConfig", "PythonProfilingConfig",
    "HorovodProfilingConfig", "SMDataParallelProfilingConfig",
    # Read by others, not by the hook: the platform's sampling interval; smdebug's old switch.
    "ProfilingIntervalInMilliseconds", "ProfilerEnabled",
)
_RANGE_KEYS = ("StartStep", "NumSteps", "StartTimeInSecSinceEpoch", "DurationInSeconds", "Duration")
_EXTRA_KEYS = {
    "DataloaderProfilingConfig": ("MetricsRegex",),
    "PythonProfilingConfig": ("ProfilerName", "cProfileTimer"),
}


@dataclass(frozen=True)
class ProfileRange:
    """Which steps or which time a metrics config profiles (smdebug's ProfileRange).

    Steps: `[start_step, start_step + num_steps)` of the hook's global step; no start step: from
    the first step checked; no num_steps: 1 step. Time: `[start_time_s, start_time_s + duration_s)`;
    no start time: from the first check; no duration: the one step that starts first at or after
    the start time. The open ends are resolved by `sdlocal.hook._timeline.RangeTracker`.
    """

    start_step: int | None = None
    num_steps: int | None = None
    start_time_s: float | None = None
    duration_s: float | None = None

    @property
    def by_time(self) -> bool:
        return self.start_time_s is not None or self.duration_s is not None


@dataclass(frozen=True)
class DataloaderProfiling:
    range: ProfileRange
    metrics_regex: str = ".*"

    def matches(self, name: str) -> bool:
        # smdebug: re.match of the lowercased metric name (the whole config is lowercased there)
        return re.match(self.metrics_regex, name, re.IGNORECASE) is not None


@dataclass(frozen=True)
class PythonProfiling:
    range: ProfileRange
    profiler_name: str = "cprofile"
    cprofile_timer: str = "total_time"


@dataclass(frozen=True)
class ProfilerConfig:
    enabled: bool = False
    local_path: str = DEFAULT_LOCAL_PATH
    max_file_size: int = MAX_FILE_SIZE_DEFAULT
    close_interval_s: float = CLOSE_INTERVAL_DEFAULT_S
    file_open_fail_threshold: int = FILE_OPEN_FAIL_THRESHOLD_DEFAULT
    detailed: ProfileRange | None = None
    dataloader: DataloaderProfiling | None = None
    python: PythonProfiling | None = None
    horovod: ProfileRange | None = None
    smdataparallel: ProfileRange | None = None
    source: str = ""  # the file it was read from, for messages

    @staticmethod
    def default_path() -> str:
        """`$SMPROFILER_CONFIG_PATH`, else SageMaker's path; read at call time."""
        return os.environ.get(CONFIG_PATH_ENV) or DEFAULT_CONFIG_PATH

    @classmethod
    def disabled(cls, source: str = "") -> ProfilerConfig:
        return cls(enabled=False, source=source)

    @classmethod
    def load(cls, path: str | Path | None = None) -> ProfilerConfig:
        """The job's profiler config; disabled (not an error) when the file does not exist."""
        p = Path(path if path is not None else cls.default_path())
        if not p.is_file():
            return cls.disabled(str(p))
        return cls.from_json_file(p)

    @classmethod
    def from_json_file(cls, path: str | Path) -> ProfilerConfig:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except OSError as e:
            raise HookConfigError(str(p), f"cannot read the profiler config: {e}") from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HookConfigError(str(p), f"not valid JSON: {e}") from e
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> ProfilerConfig:
        top = _keyed(data, _TOP_KEYS, "<root>")
        if _parse_bool(top.get("DisableProfiler"), "DisableProfiler"):
            return cls.disabled(source)
        raw_params = top.get("ProfilingParameters")
        if raw_params is None or raw_params == {}:
            return cls.disabled(source)  # smdebug: no parameters means the profiler is off
        params = _keyed(raw_params, _PARAM_KEYS, "ProfilingParameters")

        def where(key: str) -> str:
            return f"ProfilingParameters.{key}"

        local_path = params.get("LocalPath", DEFAULT_LOCAL_PATH)
        if not isinstance(local_path, str) or not local_path.strip():
            raise HookConfigError(where("LocalPath"), f"expected a folder path, got {local_path!r}")
        detailed = _metrics_config(params, "DetailedProfilingConfig")
        dataloader = _metrics_config(params, "DataloaderProfilingConfig")
        python = _metrics_config(params, "PythonProfilingConfig")
        horovod = _metrics_config(params, "HorovodProfilingConfig")
        smddp = _metrics_config(params, "SMDataParallelProfilingConfig")
        return cls(
            enabled=True,
            local_path=local_path,
            max_file_size=int(_parse_number(params.get("RotateMaxFileSizeInBytes", MAX_FILE_SIZE_DEFAULT),
                                            where("RotateMaxFileSizeInBytes"), minimum=1)),
            close_interval_s=_parse_number(params.get("RotateFileCloseIntervalInSeconds", CLOSE_INTERVAL_DEFAULT_S),
                                           where("RotateFileCloseIntervalInSeconds"), positive=True),
            file_open_fail_threshold=int(_parse_number(
                params.get("FileOpenFailThreshold", FILE_OPEN_FAIL_THRESHOLD_DEFAULT),
                where("FileOpenFailThreshold"), minimum=1, integral=True)),
            detailed=_range(detailed, "DetailedProfilingConfig") if detailed is not None else None,
            dataloader=_dataloader(dataloader) if dataloader is not None else None,
            python=_python(python) if python is not None else None,
            horovod=_range(horovod, "HorovodProfilingConfig") if horovod is not None else None,
            smdataparallel=(_range(smddp, "SMDataParallelProfilingConfig") if smddp is not None else None),
            source=source,
        )


# ---------------------------------------------------------------------------- parsing helpers


def _keyed(value: Any, known: tuple[str, ...], where: str) -> dict[str, Any]:
    """A JSON object's entries under their canonical key names (matched case-insensitively);
    unknown keys are logged and dropped."""
    if not isinstance(value, Mapping):
        raise HookConfigError(where, f"expected a JSON object, got {value!r}")
    canon = {k.lower(): k for k in known}
    out: dict[str, Any] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise HookConfigError(where, f"keys must be strings, got {key!r}")
        name = canon.get(key.lower())
        if name is None:
            logger.warning("%s.%s is not a known profiler parameter; ignored", where, key)
            continue
        if name in out:
            raise HookConfigError(f"{where}.{key}", f"given twice (keys are case-insensitive: {name})")
        out[name] = v
    return out


def _metrics_config(params: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """The metrics config dict under `key` (a string encoding a dict, or a dict); None when absent,
    null or empty (smdebug: an empty config is no config)."""
    where = f"ProfilingParameters.{key}"
    raw = params.get(key)
    if _is_none(raw):
        return None
    if isinstance(raw, str):
        try:
            value: Any = json.loads(raw)
        except ValueError:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise HookConfigError(where, f"expected a dict like '{{\"StartStep\": 5, \"NumSteps\": 1}}', "
                                             f"got {raw!r}") from None
    else:
        value = raw
    if not isinstance(value, Mapping):
        raise HookConfigError(where, f"expected a dict, got {raw!r}")
    known = _RANGE_KEYS + _EXTRA_KEYS.get(key, ())
    entries = _keyed(value, known, where)
    return entries or None


def _range(entries: Mapping[str, Any], key: str) -> ProfileRange:
    where = f"ProfilingParameters.{key}"
    if "Duration" in entries and "DurationInSeconds" in entries:
        raise HookConfigError(f"{where}.Duration", "give Duration or DurationInSeconds, not both")
    duration = entries.get("DurationInSeconds", entries.get("Duration"))
    dkey = "DurationInSeconds" if "DurationInSeconds" in entries else "Duration"
    r = ProfileRange(
        start_step=_opt_int(entries.get("StartStep"), f"{where}.StartStep", minimum=0),
        num_steps=_opt_int(entries.get("NumSteps"), f"{where}.NumSteps", minimum=1),
        start_time_s=(None if _is_none(entries.get("StartTimeInSecSinceEpoch")) else
                      _parse_number(entries["StartTimeInSecSinceEpoch"], f"{where}.StartTimeInSecSinceEpoch",
                                    minimum=0)),
        duration_s=None if _is_none(duration) else _parse_number(duration, f"{where}.{dkey}", positive=True),
    )
    if r.by_time and (r.start_step is not None or r.num_steps is not None):
        raise HookConfigError(where, "give a step range (StartStep, NumSteps) or a time range "
                                     "(StartTimeInSecSinceEpoch, DurationInSeconds), not both")
    return r


def _dataloader(entries: Mapping[str, Any]) -> DataloaderProfiling:
    where = "ProfilingParameters.DataloaderProfilingConfig.MetricsRegex"
    regex = entries.get("MetricsRegex", ".*")
    if _is_none(regex):
        regex = ".*"
    if not isinstance(regex, str):
        raise HookConfigError(where, f"expected a regular expression, got {regex!r}")
    try:
        re.compile(regex)
    except re.error as e:
        raise HookConfigError(where, f"invalid regular expression {regex!r}: {e}") from e
    return DataloaderProfiling(_range(entries, "DataloaderProfilingConfig"), regex)


def _python(entries: Mapping[str, Any]) -> PythonProfiling:
    where = "ProfilingParameters.PythonProfilingConfig"
    name = str(entries.get("ProfilerName", "cprofile")).strip().lower()
    if name not in PYTHON_PROFILERS:
        raise HookConfigError(f"{where}.ProfilerName", f"expected cProfile or Pyinstrument, got {name!r}")
    timer = str(entries.get("cProfileTimer", "total_time")).strip().lower()
    if timer not in CPROFILE_TIMERS:
        raise HookConfigError(f"{where}.cProfileTimer", f"expected one of {', '.join(CPROFILE_TIMERS)}, got {timer!r}")
    return PythonProfiling(_range(entries, "PythonProfilingConfig"), name, timer)


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


def _parse_bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise HookConfigError(where, f"expected true or false, got {value!r}")


def _parse_number(value: Any, where: str, *, minimum: float | None = None, positive: bool = False,
                  integral: bool = False) -> float:
    """A number, or a string holding one (SageMaker passes strings)."""
    what = "an integer" if integral else "a number"
    if isinstance(value, bool):
        raise HookConfigError(where, f"expected {what}, got {value!r}")
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value.strip())
        except ValueError:
            raise HookConfigError(where, f"expected {what}, got {value!r}") from None
    else:
        raise HookConfigError(where, f"expected {what}, got {value!r}")
    if not math.isfinite(out) or (integral and not out.is_integer()):
        raise HookConfigError(where, f"expected {what}, got {value!r}")
    if positive and out <= 0:
        raise HookConfigError(where, f"must be > 0, got {value!r}")
    if minimum is not None and out < minimum:
        raise HookConfigError(where, f"must be >= {minimum:g}, got {value!r}")
    return out


def _opt_int(value: Any, where: str, *, minimum: int) -> int | None:
    if _is_none(value):
        return None
    out = _parse_number(value, where, integral=True)
    if out < minimum:
        raise HookConfigError(where, f"must be >= {minimum}, got {value!r}")
    return int(out)
