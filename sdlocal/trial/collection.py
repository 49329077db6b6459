"""Collections and the collections file (trial-format.md §5), as smdebug writes them."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sdlocal.trial.errors import CorruptRecordError
from sdlocal.trial.modes import ModeKeys

_MODE_NAMES = tuple(m.name for m in ModeKeys)  # TRAIN, EVAL, PREDICT, GLOBAL


@dataclass(frozen=True)
class SaveConfigMode:
    """When one mode saves: `mode_step in save_steps`, or in [start_step, end_step) on the interval."""

    save_interval: int = 500
    save_steps: tuple[int, ...] = ()
    start_step: int = 0
    end_step: int | None = None

    def should_save(self, mode_step: int) -> bool:
        if mode_step in self.save_steps:
            return True
        if mode_step < self.start_step or (self.end_step is not None and mode_step >= self.end_step):
            return False
        return mode_step % self.save_interval == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> SaveConfigMode | None:
        if not d:
            return None
        return cls(
            save_interval=int(d.get("save_interval") or 500),
            save_steps=tuple(int(s) for s in d.get("save_steps") or ()),
            start_step=int(d.get("start_step") or 0),
            end_step=None if d.get("end_step") is None else int(d["end_step"]),
        )


@dataclass(frozen=True)
class ReductionConfig:
    save_raw_tensor: bool = True
    # smdebug's tokens: "mean", "l1_norm", "abs_max", "abs_l2_norm", ...
    reductions: tuple[str, ...] = ()
    save_shape: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": ",".join(self.reductions),
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ReductionConfig:
        if not d:
            return cls()
        reds = d.get("reductions") or ""
        tokens = [r.strip() for r in reds.split(",")] if isinstance(reds, str) else [str(r) for r in reds]
        return cls(
            save_raw_tensor=bool(d.get("save_raw_tensor", True)),
            reductions=tuple(t for t in tokens if t),
            save_shape=bool(d.get("save_shape", False)),
        )


@dataclass(frozen=True)
class Collection:
    name: str
    include_regex: tuple[str, ...] = ()
    tensor_names: frozenset[str] = frozenset()
    reduction_config: ReductionConfig = field(default_factory=ReductionConfig)
    # Mode name ("TRAIN", ...) -> its save config; a missing mode is written as null.
    save_config: Mapping[str, SaveConfigMode | None] = field(default_factory=dict)
    save_histogram: bool = True

    def matches(self, tensor_name: str) -> bool:
        """smdebug's membership rule: listed in tensor_names, or re.search of an include_regex."""
        if tensor_name in self.tensor_names:
            return True
        return any(re.search(rx, tensor_name) for rx in self.include_regex)

    def to_dict(self) -> dict[str, Any]:
        save_config = {}
        for mode in _MODE_NAMES:
            cfg = self.save_config.get(mode)
            save_config[mode] = cfg.to_dict() if cfg is not None else None
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": self.reduction_config.to_dict(),
            "save_config": save_config,
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Collection:
        if not isinstance(d, Mapping) or "name" not in d:
            raise ValueError(f"collection must be an object with a name, got {d!r:.100}")
        regex = d.get("include_regex") or ()
        save_config = d.get("save_config") or {}
        return cls(
            name=str(d["name"]),
            include_regex=tuple(str(r) for r in regex),
            tensor_names=frozenset(str(t) for t in d.get("tensor_names") or ()),
            reduction_config=ReductionConfig.from_dict(d.get("reduction_config")),
            save_config={str(k).rsplit(".", 1)[-1]: SaveConfigMode.from_dict(v) for k, v in save_config.items()},
            save_histogram=bool(d.get("save_histogram", True)),
        )


@dataclass(frozen=True)
class CollectionsFile:
    collections: Mapping[str, Collection]
    num_workers: int = 1

    @classmethod
    def of(cls, collections: Iterable[Collection], num_workers: int = 1) -> CollectionsFile:
        return cls({c.name: c for c in collections}, num_workers)

    def to_json(self) -> str:
        return json.dumps(
            {
                "collections": {name: c.to_dict() for name, c in self.collections.items()},
                "_meta": {"num_workers": self.num_workers},
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "") -> CollectionsFile:
        try:
            d = json.loads(text)
            colls = {name: Collection.from_dict(c) for name, c in (d.get("collections") or {}).items()}
            num_workers = int((d.get("_meta") or {}).get("num_workers", 1))
        except (ValueError, TypeError, AttributeError, RecursionError) as e:
            raise CorruptRecordError(f"malformed collections file: {e}", where=where) from e
        return cls(colls, num_workers)
