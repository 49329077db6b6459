"""smdebug.core.reduction_config: which reductions a hook saves instead of (or beside) raw tensors,
as in smdebug 1.0: `ReductionConfig(reductions, abs_reductions, norms, abs_norms, save_raw_tensor,
save_shape)`. As smdebug's, `save_raw_tensor` defaults to False here (a hook given no reduction
config saves raw tensors). Mutable; changes take effect at the hook's next step (see save_config).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sdlocal.hook.config import NORM_OPS, REDUCTION_OPS
from sdlocal.hook.errors import HookConfigError
from smdebug.core.save_config import Tracked, TrackedList

ALLOWED_REDUCTIONS = list(REDUCTION_OPS)
ALLOWED_NORMS = list(NORM_OPS)
ALLOWED_PARAMS = ["reductions", "abs_reductions", "norms", "abs_norms", "save_raw_tensor", "save_shape"]


def _ops(value: Iterable[str] | None, name: str, allowed: list[str]) -> TrackedList:
    if value is None:
        return TrackedList()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise HookConfigError(f"ReductionConfig.{name}", f"expected a list of names, got {value!r}")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise HookConfigError(f"ReductionConfig.{name}",
                              f"unknown {', '.join(map(repr, bad))}; expected some of {', '.join(allowed)}")
    return TrackedList(value)


class ReductionConfig(Tracked):
    def __init__(self, reductions: list[str] | None = None, abs_reductions: list[str] | None = None,
                 norms: list[str] | None = None, abs_norms: list[str] | None = None,
                 save_raw_tensor: bool = False, save_shape: bool = False) -> None:
        self.reductions = _ops(reductions, "reductions", ALLOWED_REDUCTIONS)
        self.abs_reductions = _ops(abs_reductions, "abs_reductions", ALLOWED_REDUCTIONS)
        self.norms = _ops(norms, "norms", ALLOWED_NORMS)
        self.abs_norms = _ops(abs_norms, "abs_norms", ALLOWED_NORMS)
        for name, flag in (("save_raw_tensor", save_raw_tensor), ("save_shape", save_shape)):
            if not isinstance(flag, bool):
                raise HookConfigError(f"ReductionConfig.{name}", f"must be True or False, got {flag!r}")
        self.save_raw_tensor = save_raw_tensor
        self.save_shape = save_shape

    def tokens(self) -> list[str]:
        """As the config and collections file write them: `mean`, `l2_norm`, `abs_max`, `abs_l1_norm`."""
        return ([*self.reductions, *(f"{n}_norm" for n in self.norms),
                 *(f"abs_{r}" for r in self.abs_reductions), *(f"abs_{n}_norm" for n in self.abs_norms)])

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None) -> ReductionConfig | None:
        """The flat form of configs and collections files: {"reductions": "mean,abs_l2_norm", ...}."""
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise HookConfigError("ReductionConfig", f"expected a dict, got {params!r}")
        raw = params.get("reductions") or ""
        tokens = [t.strip() for t in raw.split(",")] if isinstance(raw, str) else [str(t) for t in raw]
        reds: list[str] = []
        abs_reds: list[str] = []
        norms: list[str] = []
        abs_norms: list[str] = []
        for t in filter(None, tokens):
            is_abs, bare = t.startswith("abs_"), t[4:] if t.startswith("abs_") else t
            if bare.endswith("_norm"):
                (abs_norms if is_abs else norms).append(bare[: -len("_norm")])
            else:
                (abs_reds if is_abs else reds).append(bare)
        return cls(reds, abs_reds, norms, abs_norms, bool(params.get("save_raw_tensor", False)),
                   bool(params.get("save_shape", False)))

    @classmethod
    def from_json(cls, json_str: str) -> ReductionConfig | None:
        return cls.from_dict(json.loads(json_str))

    def to_json_dict(self) -> dict[str, Any]:
        return {"save_raw_tensor": self.save_raw_tensor, "reductions": ",".join(self.tokens()),
                "save_shape": self.save_shape}

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReductionConfig):
            return NotImplemented
        return (list(self.reductions), list(self.abs_reductions), list(self.norms), list(self.abs_norms),
                self.save_raw_tensor, self.save_shape) == \
            (list(other.reductions), list(other.abs_reductions), list(other.norms), list(other.abs_norms),
             other.save_raw_tensor, other.save_shape)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"<class ReductionConfig: reductions={list(self.reductions)}, "
                f"abs_reductions={list(self.abs_reductions)}, norms={list(self.norms)}, "
                f"abs_norms={list(self.abs_norms)}>, save_shape={self.save_shape}, "
                f"save_raw_tensor={self.save_raw_tensor}")


__all__ = ["ReductionConfig"]
