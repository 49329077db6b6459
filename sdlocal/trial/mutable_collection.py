"""smdebug's mutable `Collection` (`smdebug.core.collection.Collection`): what a trial hands out
from `sdlocal.trial.collection(name)` / `trial.collections()`, so that analysis code can widen a
collection (`include(regex)`, `add_tensor_name(name)`) and query it with
`trial.tensor_names(collection=...)`. The collections file itself is read into the frozen
`sdlocal.trial.collection.Collection`; edits here are the reader's view only, never written back."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sdlocal.trial.collection import Collection as FrozenCollection
from sdlocal.trial.errors import SMDebugTypeError, SMDebugValueError


def _as_json(config: object) -> Any:
    for method in ("to_json_dict", "to_dict"):
        fn = getattr(config, method, None)
        if callable(fn):
            return fn()
    return None


class MutableCollection:
    """A named group of tensors: `tensor_names` listed by name, plus every tensor an
    `include_regex` finds (`re.search`), as smdebug's."""

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: object = None,
        save_config: object = None,
        save_histogram: bool = True,
    ) -> None:
        self.name = name
        self.include_regex: list[str] = list(include_regex) if include_regex else []
        self.tensor_names = tensor_names  # type: ignore[assignment]  # the setter checks and converts
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = save_histogram

    @property
    def tensor_names(self) -> set[str]:
        return self._tensor_names

    @tensor_names.setter
    def tensor_names(self, names: Iterable[str] | None) -> None:
        if names is None:
            self._tensor_names: set[str] = set()
        elif isinstance(names, (set, frozenset, list, tuple)):
            self._tensor_names = set(names)
        else:
            raise SMDebugTypeError("tensor_names can only be list or set")

    def include(self, t: str | list[Any]) -> None:
        """Add a regex (or a list of them, nested lists too)."""
        if isinstance(t, list):
            for item in t:
                self.include(item)
        elif isinstance(t, str):
            self.include_regex.append(t)
        else:
            raise SMDebugTypeError("Can only include str or list")

    def has_tensor_name(self, tname: str) -> bool:
        return tname in self._tensor_names

    def add_tensor_name(self, tname: str) -> None:
        self._tensor_names.add(tname)

    def remove_tensor_name(self, tname: str) -> None:
        self._tensor_names.discard(tname)

    def matches(self, tensor_name: str) -> bool:
        if tensor_name in self._tensor_names:
            return True
        return any(re.search(rx, tensor_name) for rx in self.include_regex)

    # ---- conversions -------------------------------------------------------------------------
    @classmethod
    def of(cls, frozen: FrozenCollection) -> MutableCollection:
        return cls(
            frozen.name,
            include_regex=frozen.include_regex,
            tensor_names=set(frozen.tensor_names),
            reduction_config=frozen.reduction_config,
            save_config=dict(frozen.save_config),
            save_histogram=frozen.save_histogram,
        )

    def to_json_dict(self) -> dict[str, Any]:
        save_config = self.save_config
        if isinstance(save_config, Mapping):
            save_config = {str(getattr(k, "name", k)): _as_json(v) for k, v in save_config.items()}
        elif save_config is not None:
            save_config = _as_json(save_config)
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self._tensor_names),
            "reduction_config": _as_json(self.reduction_config) if self.reduction_config is not None else None,
            "save_config": save_config,
            "save_histogram": self.save_histogram,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> MutableCollection:
        if not isinstance(params, Mapping):
            raise SMDebugValueError(f"params={params} must be dict")
        try:
            return cls.of(FrozenCollection.from_dict(params))
        except ValueError as exc:
            raise SMDebugValueError(str(exc)) from None

    @classmethod
    def from_json(cls, json_str: str) -> MutableCollection:
        return cls.from_dict(json.loads(json_str))

    # ---- smdebug's identity: by name for hashing, by content for equality --------------------
    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MutableCollection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    def __repr__(self) -> str:
        return f"<class Collection: name={self.name}>"

    def __str__(self) -> str:
        return str(self.to_json_dict())
