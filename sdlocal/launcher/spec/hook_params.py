"""DebugHookConfig's HookParameters and CollectionParameters, checked when the spec is read.

The hook parses them in the training process (hook/config.py); a bad value found there fails the
training after everything has started, and an unknown key (a typo such as `save_intervall`) is
only logged and ignored, as smdebug does. Here the launcher runs the hook's own parser on the
configuration the training container will get, before anything starts, and refuses unknown keys
with the closest known ones: one SpecError naming the request field.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from sdlocal.hook.config import (
    BUILTIN_REGEX,
    OPTIONAL_REGEX,
    XGBOOST_REGEX,
    HookConfig,
    is_known_parameter,
    known_parameters,
)
from sdlocal.hook.errors import HookConfigError
from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.collection_configs import CollectionConfig

_PREFIX = "DebugHookConfig"
_COLLECTION_INDEX = re.compile(r"^CollectionConfigurations\[(\d+)\]")


def _check_keys(params: Mapping[str, str], where: str) -> None:
    for key in params:
        if not is_known_parameter(key):
            close = difflib.get_close_matches(key, known_parameters(), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(known_parameters())}"
            raise SpecError(f"{where}.{key}", f"unknown parameter; {hint}")


def check_hook_parameters(hook_params: Mapping[str, str], entries: Sequence[CollectionConfig],
                          merged: Sequence[CollectionConfig]) -> None:
    """`entries`: the request's CollectionConfigurations in order; `merged`: what the hook will get
    (the request's entries merged with the rules' default collections, launcher/spec/collection_configs.py)."""
    _check_keys(hook_params, f"{_PREFIX}.HookParameters")
    for i, entry in enumerate(entries):
        _check_keys(entry.parameters, f"{_PREFIX}.CollectionConfigurations[{i}].CollectionParameters")
    config = {"HookParameters": dict(hook_params), "CollectionConfigurations": [c.to_request() for c in merged]}
    # The launcher does not know the training's framework: XGBoost's built-in collections
    # (feature_importance, average_shap, trees, ...) make it the XGBoost hook's configuration.
    xgboost_only = set(XGBOOST_REGEX) - set(BUILTIN_REGEX) - set(OPTIONAL_REGEX)
    xgb = any(c.name in xgboost_only for c in merged)
    errors: list[HookConfigError] = []
    for framework in ("xgboost", "pytorch") if xgb else ("pytorch", "xgboost"):
        try:
            HookConfig.from_dict(config, framework=framework)
            return
        except HookConfigError as e:
            errors.append(e)
    first = errors[0]  # the likelier framework's complaint
    message = str(first).removeprefix(f"{first.field}: ")
    raise SpecError(f"{_PREFIX}.{_request_field(first.field, entries, merged)}", message) from None


def _request_field(field: str, entries: Sequence[CollectionConfig], merged: Sequence[CollectionConfig]) -> str:
    """The hook names a collection by its index in the merged list: name it by the request's index
    (or as a rule's default collection, which the request does not list)."""
    match = _COLLECTION_INDEX.match(field)
    if not match or int(match.group(1)) >= len(merged):
        return field
    name = merged[int(match.group(1))].name
    index = next((i for i, e in enumerate(entries) if e.name == name), None)
    where = f"CollectionConfigurations[{index}]" if index is not None else \
        f"CollectionConfigurations[{name!r}, a rule's default collection]"
    return where + field[match.end():]
