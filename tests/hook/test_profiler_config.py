"""profilerconfig.json parsing (hook.profiler_config): the shapes SageMaker and the SDK write,
smdebug's case-insensitive keys, and one clear error per bad value."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sdlocal.hook.errors import HookConfigError
from sdlocal.hook.profiler_config import (
    CLOSE_INTERVAL_DEFAULT_S,
    DEFAULT_LOCAL_PATH,
    FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
    MAX_FILE_SIZE_DEFAULT,
    ProfileRange,
    ProfilerConfig,
)

# What the SageMaker Python SDK v2 sends for `ProfilerConfig(framework_profile_params=FrameworkProfile())`:
# the metrics configs are Python dict literals with a trailing comma (its convert_json_config_to_string).
SDK_FRAMEWORK_PROFILE = {
    "LocalPath": "/opt/ml/output/profiler",
    "RotateMaxFileSizeInBytes": "10485760",
    "RotateFileCloseIntervalInSeconds": "60",
    "FileOpenFailThreshold": "50",
    "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 1, }',
    "DataloaderProfilingConfig": '{"StartStep": 7, "NumSteps": 1, "MetricsRegex": ".*", }',
    "PythonProfilingConfig": '{"StartStep": 9, "NumSteps": 3, "ProfilerName": "cprofile", "cProfileTimer": "default", }',
    "HorovodProfilingConfig": '{"StartStep": 13, "NumSteps": 1, }',
    "SMDataParallelProfilingConfig": '{"StartStep": 15, "NumSteps": 1, }',
}


def _cfg(params: dict | None, **top: object) -> ProfilerConfig:
    data: dict = {**top}
    if params is not None:
        data["ProfilingParameters"] = params
    return ProfilerConfig.from_dict(data)


def test_sdk_framework_profile_defaults() -> None:
    cfg = _cfg({"ProfilingIntervalInMilliseconds": "500", **SDK_FRAMEWORK_PROFILE}, DisableProfiler=False)
    assert cfg.enabled and cfg.local_path == "/opt/ml/output/profiler"
    assert (cfg.max_file_size, cfg.close_interval_s, cfg.file_open_fail_threshold) == (10485760, 60.0, 50)
    assert cfg.detailed == ProfileRange(start_step=5, num_steps=1)
    assert cfg.dataloader is not None and cfg.dataloader.range == ProfileRange(7, 1) and cfg.dataloader.metrics_regex == ".*"
    assert cfg.python is not None and cfg.python.range == ProfileRange(9, 3)
    assert (cfg.python.profiler_name, cfg.python.cprofile_timer) == ("cprofile", "default")
    assert cfg.horovod == ProfileRange(13, 1) and cfg.smdataparallel == ProfileRange(15, 1)


def test_sdlocal_default_request_enables_the_timeline_only() -> None:
    """A ProfilerConfig without framework parameters: sdlocal writes the sampling interval only.
    smdebug's rule: non-empty ProfilingParameters enable the profiler (the step timeline)."""
    cfg = _cfg({"ProfilingIntervalInMilliseconds": "500"}, DisableProfiler=False)
    assert cfg.enabled
    assert (cfg.local_path, cfg.max_file_size, cfg.close_interval_s, cfg.file_open_fail_threshold) == (
        DEFAULT_LOCAL_PATH, MAX_FILE_SIZE_DEFAULT, CLOSE_INTERVAL_DEFAULT_S, FILE_OPEN_FAIL_THRESHOLD_DEFAULT)
    assert cfg.detailed is cfg.dataloader is cfg.python is None


@pytest.mark.parametrize("data", [
    {"ProfilingParameters": {"LocalPath": "/x"}, "DisableProfiler": True},
    {"ProfilingParameters": {"LocalPath": "/x"}, "DisableProfiler": "True"},
    {"profilingparameters": {"LocalPath": "/x"}, "disableprofiler": "true"},
    {"ProfilingParameters": {}, "DisableProfiler": False},
    {"ProfilingParameters": None},
    {"DisableProfiler": False},
    {},
])
def test_disabled(data: dict) -> None:
    assert not ProfilerConfig.from_dict(data).enabled


def test_missing_file_is_disabled_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(tmp_path / "absent.json"))
    cfg = ProfilerConfig.load()
    assert not cfg.enabled and cfg.source == str(tmp_path / "absent.json")
    monkeypatch.delenv("SMPROFILER_CONFIG_PATH")
    assert ProfilerConfig.default_path() == "/opt/ml/input/config/profilerconfig.json"


def test_keys_are_case_insensitive_and_values_may_be_json_dicts_or_objects(tmp_path: Path) -> None:
    # smdebug's own test config (case_insensitive_profiler_config_parser.json), with our additions.
    path = tmp_path / "profilerconfig.json"
    path.write_text(json.dumps({"profilingparameters": {
        "PROFILERENABLED": True, "localPath": "/tmp/Test", "rotateMaxFileSizeInBYTES": 100,
        "RotatefileCloseintervalInseconds": "0.5", "FILEopenFAILthreshold": "5",
        "detailedProfilingconfig": "{\"startstep\": \"2\", \"NUMSTEPS\": \"3\"}",
        "dataloaderprofilingconfig": {"StartTimeInSecSinceEpoch": 1700000000.5, "durationinseconds": "2.5",
                                      "metricsregex": "DataLoaderIter"},
    }}))
    cfg = ProfilerConfig.from_json_file(path)
    assert cfg.enabled and cfg.local_path == "/tmp/Test"  # values keep their case
    assert (cfg.max_file_size, cfg.close_interval_s, cfg.file_open_fail_threshold) == (100, 0.5, 5)
    assert cfg.detailed == ProfileRange(start_step=2, num_steps=3)
    assert cfg.dataloader is not None
    assert cfg.dataloader.range == ProfileRange(start_time_s=1700000000.5, duration_s=2.5)
    assert cfg.dataloader.matches("DataLoaderIter") and cfg.dataloader.matches("dataloaderiter")
    assert not cfg.dataloader.matches("DataLoaderWorker")


def test_sdk_time_range_key_duration() -> None:
    """The SDK's TimeRange writes `Duration`; smdebug reads `DurationInSeconds`: both are read."""
    cfg = _cfg({"DetailedProfilingConfig": '{"StartTimeInSecSinceEpoch": 1700000000, "Duration": 5, }',
                "DataloaderProfilingConfig": '{"Duration": 0.25, }'})
    assert cfg.detailed == ProfileRange(start_time_s=1700000000.0, duration_s=5.0)
    assert cfg.dataloader is not None and cfg.dataloader.range == ProfileRange(duration_s=0.25)


def test_open_ended_and_empty_ranges() -> None:
    cfg = _cfg({"DetailedProfilingConfig": '{"NumSteps": 4}', "DataloaderProfilingConfig": "{}",
                "PythonProfilingConfig": "None"})
    assert cfg.detailed == ProfileRange(num_steps=4)
    assert cfg.dataloader is None and cfg.python is None  # smdebug: an empty config is no config


def test_unknown_keys_are_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sdlocal.hook.profiler_config"):
        cfg = _cfg({"ProfilingIntervalInMilliseconds": "500", "CPUProfilingDuration": "3600",
                    "DataloaderProfilingConfig": '{"StartStep": 1, "Colour": "red"}'}, Extra=1)
    assert cfg.enabled and cfg.dataloader is not None and cfg.dataloader.range == ProfileRange(1, None)
    warned = sorted(r.getMessage() for r in caplog.records)
    assert warned == [
        "<root>.Extra is not a known profiler parameter; ignored",
        "ProfilingParameters.CPUProfilingDuration is not a known profiler parameter; ignored",
        "ProfilingParameters.DataloaderProfilingConfig.Colour is not a known profiler parameter; ignored",
    ]


def test_only_unknown_parameters_still_enable_the_profiler() -> None:
    # smdebug: any non-empty ProfilingParameters turn the profiler on.
    assert _cfg({"SomethingNew": "1"}).enabled


@pytest.mark.parametrize("params, key", [
    ({"LocalPath": ""}, "ProfilingParameters.LocalPath"),
    ({"LocalPath": 3}, "ProfilingParameters.LocalPath"),
    ({"RotateMaxFileSizeInBytes": "ten"}, "ProfilingParameters.RotateMaxFileSizeInBytes"),
    ({"RotateMaxFileSizeInBytes": "0"}, "ProfilingParameters.RotateMaxFileSizeInBytes"),
    ({"RotateFileCloseIntervalInSeconds": "-1"}, "ProfilingParameters.RotateFileCloseIntervalInSeconds"),
    ({"RotateFileCloseIntervalInSeconds": "nan"}, "ProfilingParameters.RotateFileCloseIntervalInSeconds"),
    ({"FileOpenFailThreshold": "1.5"}, "ProfilingParameters.FileOpenFailThreshold"),
    ({"FileOpenFailThreshold": True}, "ProfilingParameters.FileOpenFailThreshold"),
    ({"DetailedProfilingConfig": "StartStep=5"}, "ProfilingParameters.DetailedProfilingConfig"),
    ({"DetailedProfilingConfig": "[1, 2]"}, "ProfilingParameters.DetailedProfilingConfig"),
    ({"DetailedProfilingConfig": '{"StartStep": "x"}'}, "ProfilingParameters.DetailedProfilingConfig.StartStep"),
    ({"DetailedProfilingConfig": '{"StartStep": -1}'}, "ProfilingParameters.DetailedProfilingConfig.StartStep"),
    ({"DetailedProfilingConfig": '{"NumSteps": 0}'}, "ProfilingParameters.DetailedProfilingConfig.NumSteps"),
    ({"DataloaderProfilingConfig": '{"Duration": 0}'}, "ProfilingParameters.DataloaderProfilingConfig.Duration"),
    ({"DataloaderProfilingConfig": '{"DurationInSeconds": "soon"}'},
     "ProfilingParameters.DataloaderProfilingConfig.DurationInSeconds"),
    ({"DataloaderProfilingConfig": '{"StartStep": 1, "DurationInSeconds": 3}'},
     "ProfilingParameters.DataloaderProfilingConfig"),
    ({"DataloaderProfilingConfig": '{"Duration": 1, "DurationInSeconds": 3}'},
     "ProfilingParameters.DataloaderProfilingConfig.Duration"),
    ({"DataloaderProfilingConfig": '{"MetricsRegex": "("}'},
     "ProfilingParameters.DataloaderProfilingConfig.MetricsRegex"),
    ({"PythonProfilingConfig": '{"ProfilerName": "perf"}'}, "ProfilingParameters.PythonProfilingConfig.ProfilerName"),
    ({"PythonProfilingConfig": '{"cProfileTimer": "wall"}'}, "ProfilingParameters.PythonProfilingConfig.cProfileTimer"),
    ({"LocalPath": "/a", "localpath": "/b"}, "ProfilingParameters.localpath"),
])
def test_bad_values_name_the_key(params: dict, key: str) -> None:
    with pytest.raises(HookConfigError) as err:
        _cfg(params)
    assert err.value.field == key
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("data, key", [
    ([], "<root>"),
    ({"ProfilingParameters": "LocalPath=/x"}, "ProfilingParameters"),
    ({"ProfilingParameters": {"LocalPath": "/x"}, "DisableProfiler": "maybe"}, "DisableProfiler"),
])
def test_bad_shapes(data: object, key: str) -> None:
    with pytest.raises(HookConfigError) as err:
        ProfilerConfig.from_dict(data)
    assert err.value.field == key


def test_unreadable_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "profilerconfig.json"
    path.write_text("{not json")
    with pytest.raises(HookConfigError) as err:
        ProfilerConfig.load(path)
    assert err.value.field == str(path) and "not valid JSON" in str(err.value)
