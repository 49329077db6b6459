"""The request's training inputs: `InputDataConfig` channels, `Environment`, the instance type.

Parsed at the spec boundary with the service's constraints (botocore's model of CreateTrainingJob)
and one `SpecError` naming the field. sdlocal's one extension: a channel may be a local folder or
file, given as `S3DataSource.S3Uri: file:///abs/path` (or `file://relative/to/the/spec`), or in the
shape the SageMaker SDK's local mode sends, `FileDataSource.FileUri`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.values import (
    as_list,
    as_mapping,
    decode_sdk_hyperparameter,
    instance_resources,
    local_path,
    s3_base,
    scalar_to_str,
    split_s3_uri,
)

MAX_CHANNELS = 20
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_CHARS = 512
_CHANNEL_NAME = re.compile(r"[A-Za-z0-9.\-_]+")
_ENV_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_INPUT_MODES = ("Pipe", "File", "FastFile")
_S3_DATA_TYPES = ("ManifestFile", "S3Prefix", "AugmentedManifestFile", "Converse")
_DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")
_RECORD_WRAPPERS = ("None", "RecordIO")
_COMPRESSIONS = ("None", "Gzip")
_CHANNEL_FIELDS = frozenset({"ChannelName", "DataSource", "ContentType", "CompressionType", "RecordWrapperType",
                             "InputMode"})


@dataclass(frozen=True)
class Channel:
    """One InputDataConfig channel: `source` is an `s3://` prefix or an absolute local path."""

    name: str
    source: str
    input_mode: str = "File"  # File or FastFile (both: the files are there before training starts)
    content_type: str | None = None
    distribution: str = "FullyReplicated"
    record_wrapper: str = "None"

    @property
    def is_s3(self) -> bool:
        return self.source.startswith("s3://")

    def to_input_data_config(self) -> dict[str, str]:
        """The channel's entry in /opt/ml/input/config/inputdataconfig.json, as SageMaker writes it."""
        entry = {"TrainingInputMode": self.input_mode, "S3DistributionType": self.distribution,
                 "RecordWrapperType": self.record_wrapper}
        if self.content_type is not None:
            entry = {"ContentType": self.content_type, **entry}
        return entry


def _enum(value: Any, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise SpecError(field, f"{value!r} failed to satisfy constraint: Member must satisfy enum value set: "
                               f"[{', '.join(allowed)}]")
    return str(value)


def parse_channels(raw: Any, base_dir: Path, default_mode: str, ignored: list[str],
                   warnings: list[str]) -> tuple[Channel, ...]:
    entries = as_list(raw, "InputDataConfig")
    if raw is not None and not 1 <= len(entries) <= MAX_CHANNELS:
        raise SpecError("InputDataConfig", f"has {len(entries)} channels; it takes 1 to {MAX_CHANNELS}")
    channels = []
    for i, entry in enumerate(entries):
        where = f"InputDataConfig[{i}]"
        entry = as_mapping(entry, where)
        ignored += [f"InputDataConfig[].{k}" for k in entry if k not in _CHANNEL_FIELDS]
        name = entry.get("ChannelName")
        if not isinstance(name, str) or not 1 <= len(name) <= 64 or not _CHANNEL_NAME.fullmatch(name):
            raise SpecError(f"{where}.ChannelName", f"{name!r} failed to satisfy constraint: Member must have "
                            "length 1-64 and satisfy regular expression pattern: [A-Za-z0-9\\.\\-_]+")
        where = f"{where} ({name})"
        mode = _enum(entry.get("InputMode", default_mode), _INPUT_MODES, f"{where}.InputMode")
        if mode == "Pipe":
            raise SpecError(f"{where}.InputMode", "Pipe mode is not supported by sdlocal (use File: the channel "
                                                  "is downloaded to /opt/ml/input/data/<channel> before training)")
        if mode == "FastFile":
            warnings.append(f"{where}: FastFile input mode runs as File (the data is downloaded before training; "
                            "the script sees the same files)")
        compression = _enum(entry.get("CompressionType", "None"), _COMPRESSIONS, f"{where}.CompressionType")
        if compression != "None":
            raise SpecError(f"{where}.CompressionType", "Gzip applies to Pipe input mode only; use None")
        content_type = entry.get("ContentType")
        if content_type is not None:
            content_type = scalar_to_str(content_type, f"{where}.ContentType")
            if len(content_type) > 256:
                raise SpecError(f"{where}.ContentType", "has more than 256 characters")
        source, distribution = _data_source(entry.get("DataSource"), where, base_dir, ignored)
        wrapper = _enum(entry.get("RecordWrapperType", "None"), _RECORD_WRAPPERS, f"{where}.RecordWrapperType")
        channels.append(Channel(name, source, mode, content_type, distribution, wrapper))
    names = [c.name for c in channels]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError("InputDataConfig", f"channel names must be unique; duplicated: {', '.join(dup)}")
    return tuple(channels)


def _data_source(raw: Any, where: str, base_dir: Path, ignored: list[str]) -> tuple[str, str]:
    """(s3:// prefix or absolute local path, S3DataDistributionType)."""
    source = as_mapping(raw, f"{where}.DataSource")
    if "FileDataSource" in source:  # the SageMaker SDK's local mode: TrainingInput("file:///data")
        file_source = as_mapping(source["FileDataSource"], f"{where}.DataSource.FileDataSource")
        return _local_path(file_source.get("FileUri"), f"{where}.DataSource.FileDataSource.FileUri", base_dir), \
            "FullyReplicated"
    if "S3DataSource" not in source:
        other = ", ".join(map(str, source)) or "nothing"
        raise SpecError(f"{where}.DataSource", f"needs S3DataSource (S3Uri: s3://... or file://...); got {other}")
    s3 = as_mapping(source["S3DataSource"], f"{where}.DataSource.S3DataSource")
    field = f"{where}.DataSource.S3DataSource"
    ignored += [f"InputDataConfig[].DataSource.S3DataSource.{k}" for k in s3
                if k not in ("S3DataType", "S3Uri", "S3DataDistributionType")]
    data_type = _enum(s3.get("S3DataType", "S3Prefix"), _S3_DATA_TYPES, f"{field}.S3DataType")
    if data_type != "S3Prefix":
        raise SpecError(f"{field}.S3DataType", f"{data_type} is not supported by sdlocal; use S3Prefix")
    distribution = _enum(s3.get("S3DataDistributionType", "FullyReplicated"), _DISTRIBUTIONS,
                         f"{field}.S3DataDistributionType")  # ShardedByS3Key: each host its share
    uri = s3.get("S3Uri")
    if isinstance(uri, str) and uri.startswith("file://"):
        return _local_path(uri, f"{field}.S3Uri", base_dir), distribution
    if not isinstance(uri, str) or len(uri) > 1024 or not re.fullmatch(r"s3://([^/]+)/?(.*)", uri):
        raise SpecError(f"{field}.S3Uri", f"{uri!r} failed to satisfy constraint: Member must satisfy regular "
                                          "expression pattern: s3://([^/]+)/?(.*) (or sdlocal's file://PATH)")
    return uri, distribution


def _local_path(uri: Any, field: str, base_dir: Path) -> str:
    if not isinstance(uri, str) or not uri.startswith("file://") or len(uri) <= len("file://"):
        raise SpecError(field, f"{uri!r} is not a file:// URI (file:///absolute/path or file://relative/path)")
    path = local_path(base_dir, uri[len("file://"):], field)
    if not path.exists():
        raise SpecError(field, f"local channel data {path} does not exist")
    return str(path)


def parse_environment(raw: Any) -> dict[str, str]:
    env = as_mapping(raw, "Environment")
    if len(env) > MAX_ENVIRONMENT:
        raise SpecError("Environment", f"has {len(env)} entries; the maximum is {MAX_ENVIRONMENT}")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or len(key) > MAX_ENVIRONMENT_CHARS or not _ENV_KEY.fullmatch(key):
            raise SpecError("Environment", f"key {key!r} failed to satisfy constraint: Member must have length "
                            f"less than or equal to {MAX_ENVIRONMENT_CHARS} and satisfy regular expression "
                            "pattern: [a-zA-Z_][a-zA-Z0-9_]*")
        text = scalar_to_str(value, f"Environment.{key}")
        if len(text) > MAX_ENVIRONMENT_CHARS:
            raise SpecError(f"Environment.{key}", f"value has {len(text)} characters; the maximum is "
                                                  f"{MAX_ENVIRONMENT_CHARS}")
        out[key] = text
    return out


MAX_INSTANCE_COUNT = 16  # hosts sdlocal starts on one machine (SageMaker's own limit is per account)


def parse_instance_count(resource_config: Mapping[str, Any]) -> int:
    """ResourceConfig.InstanceCount: the hosts algo-1..algo-N the job runs on (0 is read as 1, as
    a request without the field)."""
    count = resource_config.get("InstanceCount", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise SpecError("ResourceConfig.InstanceCount", f"must be an integer >= 0, got {count!r}")
    if count > MAX_INSTANCE_COUNT:
        raise SpecError("ResourceConfig.InstanceCount", f"{count} hosts on one machine: sdlocal runs at most "
                                                        f"{MAX_INSTANCE_COUNT}")
    if resource_config.get("InstanceGroups"):
        raise SpecError("ResourceConfig.InstanceGroups", "heterogeneous clusters are not supported by sdlocal: "
                                                         "use InstanceType and InstanceCount")
    return max(count, 1)


def parse_instance_type(resource_config: Mapping[str, Any]) -> str:
    """ResourceConfig.InstanceType (what resourceconfig.json reports), else "local" as in SDK local mode."""
    instance_type = resource_config.get("InstanceType")
    if instance_type is None or instance_type in ("local", "local_gpu"):  # the SDK's local mode says local
        return "local"
    if not isinstance(instance_type, str):
        raise SpecError("ResourceConfig.InstanceType", f"must be a string, got {type(instance_type).__name__}")
    try:
        instance_resources(instance_type)
    except ValueError as e:
        raise SpecError("ResourceConfig.InstanceType", str(e)) from None
    return instance_type


def parse_source_dir(raw: Any, base_dir: Path, sdk_dir: str | None) -> tuple[Path, str | None]:
    """(the code folder, the s3:// tarball to unpack into the job's code folder or None).

    SourceDir wins over the SDK's `sagemaker_submit_directory`; an `s3://` one of either is a
    gzipped tarball (the SDK's sourcedir.tar.gz), fetched by the job before training starts."""
    field_name = "SourceDir"
    if not raw and sdk_dir:
        raw, field_name = decode_sdk_hyperparameter(sdk_dir), "HyperParameters.sagemaker_submit_directory"
    if raw is not None and not isinstance(raw, str):
        raise SpecError(field_name, f"must be a path or an s3:// URI, got {type(raw).__name__}")
    if raw and raw.startswith("s3://"):
        s3_base(raw, field_name)  # validates bucket and shape
        if raw.endswith("/") or not split_s3_uri(raw)[1]:
            raise SpecError(field_name, f"{raw} names an S3 prefix; give the tarball (e.g. .../sourcedir.tar.gz)")
        return base_dir.resolve(), raw
    if raw and raw.startswith("file://"):
        raw = raw[len("file://"):]
    elif raw and "://" in raw:
        raise SpecError(field_name, f"{raw} is neither a local path nor an s3:// URI")
    path = local_path(base_dir, raw, field_name) if raw else base_dir.resolve()
    if not path.is_dir():
        raise SpecError(field_name, f"{path} is not a directory")
    return path, None
