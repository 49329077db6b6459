"""Reading a job spec file: a CreateTrainingJob request in JSON or YAML, any bytes refused in one line
naming the file (not UTF-8, malformed, too large, nested too deep, not a mapping)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from sdlocal.launcher.errors import SpecError

MAX_SPEC_BYTES = 10 * 1024 * 1024  # a CreateTrainingJob request is far smaller; bigger is not a spec


MAX_SPEC_DEPTH = 32  # the deepest request field is ~6 levels down


MAX_SPEC_NODES = 100_000  # also bounds YAML aliases that expand exponentially ("billion laughs")


def load_request(path: Path) -> dict[str, Any]:
    """Read a request from a JSON or YAML file (YAML is a superset; `.json` gets JSON's messages).

    Any bytes give one SpecError naming the file: not UTF-8, malformed, nested deeper than a
    request is, or too large."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
    except OSError as e:
        raise SpecError(str(path), f"cannot read the job spec: {e.strerror or e}") from e
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(str(path), f"is larger than {MAX_SPEC_BYTES // 2**20} MiB; not a job spec")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), f"not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r}); "
                                   f"the job spec must be {kind}") from None
    try:
        data = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except RecursionError:  # the parsers recurse per level: ours is the clearer message
        raise SpecError(str(path), f"nests deeper than {MAX_SPEC_DEPTH} levels; not a job spec") from None
    except (ValueError, yaml.YAMLError) as e:
        detail = " ".join(str(e).split())
        raise SpecError(str(path), f"malformed {kind}: {detail}") from e
    _check_shape(data, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(str(path), f"the job spec must be a map of request fields, got {type(data).__name__}")
    return data


def _check_shape(data: Any, path: Path) -> None:
    """Depth and size limits, checked without recursion (the parsed value may be deep or aliased)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > MAX_SPEC_DEPTH:
            raise SpecError(str(path), f"nests deeper than {MAX_SPEC_DEPTH} levels; not a job spec")
        if nodes > MAX_SPEC_NODES:
            raise SpecError(str(path), f"has more than {MAX_SPEC_NODES} values (YAML aliases count each time "
                                       "they are used); not a job spec")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
