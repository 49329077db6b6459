"""smdebug.pytorch.collection: the hook's collections, mutable as smdebug's (`include`,
`include_regex`, `tensor_names`, `save_config`, `reduction_config`, `save_histogram`,
`add_module_tensors`). A change takes effect at the hook's next step (smdebug.core.save_config).

What the reader returns (`sdlocal.trial.collection(...)`) is smdebug.core.collection's read-only Collection.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sdlocal.hook.config import BUILTIN_REGEX
from sdlocal.hook.errors import HookConfigError, HookError
from smdebug.core.collection import CollectionKeys
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, Tracked, TrackedDict, TrackedList, TrackedSet

# smdebug's PyTorch default collections and their regexes (sdlocal's hook.config has the same).
DEFAULT_PYTORCH_COLLECTIONS = ("all", "default", "weights", "biases", "gradients", "losses")


class Collection(Tracked):
    include_regex: TrackedList
    tensor_names: TrackedSet
    reduction_config: ReductionConfig | None
    save_config: SaveConfig | None

    def __init__(self, name: str, include_regex: Iterable[str] | None = None,
                 tensor_names: Iterable[str] | None = None, reduction_config: ReductionConfig | None = None,
                 save_config: SaveConfig | Mapping[Any, Any] | None = None, save_histogram: bool = True) -> None:
        self.name = name
        # (str would pass for a list of characters: __setattr__ rejects it)
        self.include_regex = include_regex if include_regex is not None else []  # type: ignore[assignment]
        self.tensor_names = tensor_names if tensor_names is not None else set()  # type: ignore[assignment]
        self.reduction_config = reduction_config
        self.save_config = SaveConfig(mode_save_configs=save_config) if isinstance(save_config, Mapping) else save_config
        self.save_histogram = save_histogram
        self._modules: TrackedDict = TrackedDict()

    def __setattr__(self, name: str, value: Any) -> None:
        # smdebug's property setters: type checks, and containers that report changes.
        if name == "include_regex":
            if isinstance(value, str) or not all(isinstance(r, str) for r in value):
                raise HookConfigError(f"Collection {self.name!r}.include_regex", f"expected a list of str, got {value!r}")
            value = value if isinstance(value, TrackedList) else TrackedList(value)
        elif name == "tensor_names":
            if isinstance(value, str):
                raise HookConfigError(f"Collection {self.name!r}.tensor_names", "expected a list or set of names")
            value = value if isinstance(value, TrackedSet) else TrackedSet(value)
        elif name == "reduction_config" and value is not None and not isinstance(value, ReductionConfig):
            raise HookConfigError(f"Collection {self.name!r}.reduction_config",
                                  f"expected a ReductionConfig, got {value!r}")
        elif name == "save_config" and value is not None:
            if isinstance(value, Mapping):
                value = SaveConfig(mode_save_configs=value)
            elif not isinstance(value, SaveConfig):
                raise HookConfigError(f"Collection {self.name!r}.save_config", f"expected a SaveConfig, got {value!r}")
        super().__setattr__(name, value)

    def include(self, t: str | list[str]) -> None:
        """Add a regex (or a list of them): tensors whose names match go into this collection."""
        if isinstance(t, list):
            for i in t:
                self.include(i)
        elif isinstance(t, str):
            self.include_regex.append(t)
        else:
            raise HookConfigError(f"Collection {self.name!r}.include", f"can only include str or list, got {t!r}")

    def add_module_tensors(self, module: Any, inputs: bool = False, outputs: bool = True) -> None:
        """Save this module's inputs and/or outputs in this collection (`<module>_input_<i>`, ...)."""
        self._modules[module] = (inputs, outputs)

    @property
    def modules(self) -> Mapping[Any, tuple[bool, bool]]:
        return self._modules

    def has_tensor_name(self, tname: str) -> bool:
        return tname in self.tensor_names

    def add_tensor_name(self, tname: str) -> None:
        self.tensor_names.add(tname)

    def remove_tensor_name(self, tname: str) -> None:
        self.tensor_names.discard(tname)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": self.reduction_config.to_json_dict() if self.reduction_config else None,
            "save_config": self.save_config.to_json_dict() if self.save_config else None,
            "save_histogram": self.save_histogram,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    def __str__(self) -> str:
        return str(self.to_json_dict())

    def __repr__(self) -> str:
        return f"<class Collection: name={self.name}>"

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()


class CollectionManager:
    """The hook's collections by name; starts with smdebug's PyTorch defaults."""

    def __init__(self, create_default: bool = True) -> None:
        self.collections: dict[str, Collection] = TrackedDict()  # adding one is a change too
        self._meta = {"num_workers": 1}
        if create_default:
            for name in DEFAULT_PYTORCH_COLLECTIONS:
                self.collections[name] = Collection(name, list(BUILTIN_REGEX[name]))

    def create_collection(self, name: str) -> None:
        if name not in self.collections:
            self.collections[name] = Collection(name)

    def get(self, name: str, create: bool = True) -> Collection:
        if name not in self.collections:
            if not create:
                raise HookError(f"Collection {name} has not been created")
            self.create_collection(name)
        return self.collections[name]

    def get_collections(self) -> dict[str, Collection]:
        return self.collections

    def add(self, arg: str | Collection) -> None:
        if isinstance(arg, str):
            self.create_collection(arg)
        elif isinstance(arg, Collection):
            self.collections[arg.name] = arg  # replaces one of the same name, as smdebug
        else:
            raise HookConfigError("add_collection", f"expected a Collection, got {arg!r}")

    def get_num_workers(self) -> int:
        return int(self._meta["num_workers"])

    def __repr__(self) -> str:
        return f"<class CollectionManager: collection_names={list(self.collections)}>"


__all__ = ["Collection", "CollectionKeys", "CollectionManager", "DEFAULT_PYTORCH_COLLECTIONS"]
