"""Small checks shared by the spec parser: SageMaker's limits, string maps, S3 URIs, images."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import SpecError

MAX_RULES = 20
MAX_RULE_PARAMETERS = 100
MAX_MAP_ENTRIES = 20  # HookParameters, CollectionConfigurations, CollectionParameters
MAX_VALUE_CHARS = 256
MAX_NAME_CHARS = 256
PROFILING_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)

# SageMaker's own rule images: both mean "run the built-in evaluator" here.
_DEBUGGER_IMAGE = re.compile(
    r"(^|/)sagemaker-debugger-rule(s|-evaluator)(:[\w.-]+)?(@sha256:[0-9a-f]+)?$"
)
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def is_debugger_rule_image(image: str | None) -> bool:
    """True for SageMaker's ECR rule images (`sagemaker-debugger-rules`, `...-rule-evaluator`) or none."""
    return image is None or image == "" or bool(_DEBUGGER_IMAGE.search(image))


def check_job_name(name: Any, field: str = "TrainingJobName") -> str:
    if not isinstance(name, str) or not _JOB_NAME.fullmatch(name):
        raise SpecError(
            field,
            f"{name!r} does not satisfy the constraint: 1-63 characters, letters, digits and hyphens, "
            "starting with a letter or digit (pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})",
        )
    return name


def optional_str(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise SpecError(field, f"must be a string, got {type(value).__name__}")
    return value


def local_path(base_dir: Path, text: str, field: str) -> Path:
    """`text` resolved against `base_dir`; a path the OS cannot even look up is the field's error."""
    try:
        path = (base_dir / text).resolve()
        path.exists()  # too long a name, a NUL byte: raised here, not later by whoever opens it
    except (OSError, ValueError) as e:
        raise SpecError(field, f"{text[:100]!r} is not a usable path: {e}") from None
    return path


def check_entry_point(entry_point: str, source_dir: Path, local: bool) -> None:
    """The script must be a file inside its SourceDir, as in the SageMaker toolkit, which runs it
    from the unpacked source folder: an absolute path, `..` or a symlink that leads out is refused."""
    if Path(entry_point).is_absolute() or ".." in Path(entry_point).parts:
        raise SpecError("EntryPoint", f"{entry_point!r} must be a path relative to its SourceDir, inside it")
    if not local:
        return  # an s3:// SourceDir: checked once unpacked
    path = local_path(source_dir, entry_point, "EntryPoint")
    if not path.is_relative_to(source_dir.resolve()):
        raise SpecError("EntryPoint", f"{entry_point!r} leads out of the source directory {source_dir} (to {path})")
    if not path.is_file():
        raise SpecError("EntryPoint", f"{entry_point!r} not found in the source directory {source_dir}")


def as_mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(field, f"must be a map of strings, got {type(value).__name__}")
    return value


def as_list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, got {type(value).__name__}")
    return value


def scalar_to_str(value: Any, field: str) -> str:
    """Request values are strings; numbers and booleans written in YAML are accepted as their text."""
    if isinstance(value, str):
        if "\x00" in value:  # no argument, environment variable or file name can hold one
            raise SpecError(field, "contains a NUL character")
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise SpecError(field, f"must be a string, got {type(value).__name__}")


def string_map(value: Any, field: str, *, max_entries: int, max_chars: int = MAX_VALUE_CHARS) -> dict[str, str]:
    mapping = as_mapping(value, field)
    if len(mapping) > max_entries:
        raise SpecError(field, f"has {len(mapping)} entries; the maximum is {max_entries}")
    out: dict[str, str] = {}
    for key, raw in mapping.items():
        if not isinstance(key, str) or not key:
            raise SpecError(field, f"keys must be non-empty strings, got {key!r}")
        text = scalar_to_str(raw, f"{field}.{key}")
        if len(text) > max_chars:
            raise SpecError(f"{field}.{key}", f"value has {len(text)} characters; the maximum is {max_chars}")
        out[key] = text
    return out


def s3_base(uri: Any, field: str) -> str:
    """`s3://bucket/prefix/` -> `s3://bucket/prefix` (validated); the service appends `/<job>/...`."""
    if not isinstance(uri, str) or not uri.startswith("s3://") or not uri[5:].split("/", 1)[0]:
        raise SpecError(field, f"must be an S3 URI s3://bucket[/prefix], got {uri!r}")
    return uri.rstrip("/")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> ("bucket", "a/b")."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an S3 URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key.strip("/")


def decode_sdk_hyperparameter(value: str) -> str:
    """The SDK json-encodes framework hyperparameters (`"\\"train.py\\""`); the toolkit decodes them."""
    try:
        decoded = json.loads(value)
    except (ValueError, TypeError):
        return value
    return decoded if isinstance(decoded, str) else value


_INSTANCE = re.compile(r"^ml\.([a-z]+)(\d+[a-z]*)\.(medium|large|metal|(\d*)xlarge)$")
_GIB_PER_VCPU = {"c": 2, "t": 2, "m": 4, "r": 8}


def instance_resources(instance_type: str) -> tuple[int, int]:
    """(vCPUs, GiB of memory) of a SageMaker instance type such as `ml.m5.xlarge`; ValueError
    for a name that is not one."""
    match = _INSTANCE.match(instance_type.strip())
    if not match or match.group(3) == "metal":
        raise ValueError(f"{instance_type!r} is not an instance type like ml.m5.xlarge")
    family, size, multiple = match.group(1), match.group(3), match.group(4)
    vcpus = 2 if size in ("medium", "large") else 4 * int(multiple or 1)
    return vcpus, vcpus * _GIB_PER_VCPU.get(family[0], 4)
