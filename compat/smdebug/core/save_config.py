"""smdebug.core.save_config: when a hook saves. `SaveConfig` maps each mode to a `SaveConfigMode`
(save_interval, save_steps, start_step, end_step), as in smdebug 1.0.

These objects are mutable, as smdebug's, and a change made to one after the hook was created takes
effect at the hook's next step: every change bumps a process-wide counter (`changes()`), which
the hook compares once per step. The tracked containers below serve collections and reduction
configs too (smdebug.core.reduction_config, smdebug.pytorch.collection).

Not smdebug's: `SaveConfig(10)` (an int as the first argument, which smdebug takes as
mode_save_configs and then fails on) means save_interval=10, as in smdebug's own torch_resnet
example. smdebug 1.0 has no `skip_num_steps` (pre-1.0 tornasole had): passing it is a TypeError
there and here.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sdlocal.hook.errors import HookConfigError
from sdlocal.trial.modes import ModeKeys, to_mode

DEFAULT_SAVE_CONFIG_INTERVAL = 500
DEFAULT_SAVE_CONFIG_START_STEP = 0
DEFAULT_SAVE_CONFIG_END_STEP = None
DEFAULT_SAVE_CONFIG_SAVE_STEPS: list[int] = []
ALLOWED_PARAMS = ["save_interval", "save_steps", "start_step", "end_step"]

_changes = [0]


def changes() -> int:
    """How many times any save / reduction / collection config object was changed so far."""
    return _changes[0]


def _bump() -> None:
    _changes[0] += 1


class Tracked:
    """Every attribute assignment counts as a change."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _bump()


class TrackedList(list):  # type: ignore[type-arg]
    def append(self, v: Any) -> None:
        super().append(v)
        _bump()

    def extend(self, v: Iterable[Any]) -> None:
        super().extend(v)
        _bump()

    def insert(self, i: Any, v: Any) -> None:
        super().insert(i, v)
        _bump()

    def remove(self, v: Any) -> None:
        super().remove(v)
        _bump()

    def pop(self, i: Any = -1) -> Any:
        _bump()
        return super().pop(i)

    def clear(self) -> None:
        super().clear()
        _bump()

    def __setitem__(self, i: Any, v: Any) -> None:
        super().__setitem__(i, v)
        _bump()

    def __delitem__(self, i: Any) -> None:
        super().__delitem__(i)
        _bump()

    def __iadd__(self, v: Iterable[Any]) -> TrackedList:  # type: ignore[override,misc]
        super().__iadd__(v)
        _bump()
        return self


class TrackedSet(set):  # type: ignore[type-arg]
    def add(self, v: Any) -> None:
        if v not in self:
            super().add(v)
            _bump()

    def quiet_add(self, v: Any) -> None:
        """Add without counting a change (the hook recording what it saved)."""
        super().add(v)

    def discard(self, v: Any) -> None:
        super().discard(v)
        _bump()

    def remove(self, v: Any) -> None:
        super().remove(v)
        _bump()

    def update(self, *vs: Iterable[Any]) -> None:
        super().update(*vs)
        _bump()

    def clear(self) -> None:
        super().clear()
        _bump()


class TrackedDict(dict):  # type: ignore[type-arg]
    def __setitem__(self, k: Any, v: Any) -> None:
        super().__setitem__(k, v)
        _bump()

    def __delitem__(self, k: Any) -> None:
        super().__delitem__(k)
        _bump()

    def update(self, *a: Any, **kw: Any) -> None:
        super().update(*a, **kw)
        _bump()


def _int(value: Any, name: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise HookConfigError(f"SaveConfigMode.{name}", f"expected an integer, got {value!r}") from None


class SaveConfigMode(Tracked):
    """When one mode saves: at `save_steps`, and every `save_interval` steps in
    [start_step, end_step) (end_step exclusive, None: no end). Steps count within the mode."""

    def __init__(self, save_interval: int | str | None = None, start_step: int | str | None = None,
                 end_step: int | str | None = None, save_steps: list[int] | None = None) -> None:
        interval = DEFAULT_SAVE_CONFIG_INTERVAL if save_interval is None else _int(save_interval, "save_interval")
        if interval < 1:
            raise HookConfigError("SaveConfigMode.save_interval", f"must be >= 1, got {save_interval!r}")
        self.save_interval = interval
        if save_steps is None:
            steps: list[int] = []
        elif isinstance(save_steps, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool)
                                                            for s in save_steps):
            steps = list(save_steps)
        else:
            raise HookConfigError("SaveConfigMode.save_steps", f"expected a list of integers, got {save_steps!r}")
        self.save_steps = steps
        self.start_step = DEFAULT_SAVE_CONFIG_START_STEP if start_step is None else _int(start_step, "start_step")
        self.end_step = None if end_step is None else _int(end_step, "end_step")

    def should_save_step(self, step_num: int) -> bool:
        if self.save_steps and step_num in self.save_steps:
            return True
        if step_num < self.start_step or (self.end_step is not None and step_num >= self.end_step):
            return False
        return step_num % self.save_interval == 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"save_interval": self.save_interval, "save_steps": list(self.save_steps),
                "start_step": self.start_step, "end_step": self.end_step}

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None,
                  default_values: Mapping[str, Any] | None = None) -> SaveConfigMode | None:
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise HookConfigError("SaveConfigMode", f"expected a dict, got {params!r}")
        d = dict(default_values or {})
        return cls(save_interval=params.get("save_interval", d.get("save_interval")),
                   start_step=params.get("start_step", d.get("start_step")),
                   end_step=params.get("end_step", d.get("end_step")),
                   save_steps=params.get("save_steps", d.get("save_steps")))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfigMode):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"<class SaveConfig: save_interval={self.save_interval}, save_steps={self.save_steps}, "
                f"start_step={self.start_step}, end_step={self.end_step}>")


def _mode_key(mode: Any) -> ModeKeys:
    try:
        return to_mode(getattr(mode, "name", mode))
    except (ValueError, TypeError):
        raise HookConfigError("SaveConfig.mode_save_configs", f"{mode!r} is not a mode (smdebug.modes.TRAIN, "
                              "EVAL, PREDICT or GLOBAL)") from None


class SaveConfig(Tracked):
    """A SaveConfigMode per mode. `SaveConfig(save_interval=10)` applies to every mode;
    `SaveConfig(mode_save_configs={modes.TRAIN: SaveConfigMode(...), ...})` per mode, a missing
    mode (None) taking the hook's save config (or the defaults)."""

    def __init__(self, mode_save_configs: Mapping[Any, SaveConfigMode | None] | int | None = None,
                 save_interval: int | str | None = None, start_step: int | str | None = None,
                 end_step: int | str | None = None, save_steps: list[int] | None = None) -> None:
        if isinstance(mode_save_configs, int) and not isinstance(mode_save_configs, bool):
            save_interval, mode_save_configs = mode_save_configs, None
        configs: TrackedDict = TrackedDict()
        if mode_save_configs is None:
            for mode in ModeKeys:
                configs[mode] = SaveConfigMode(save_interval, start_step, end_step, save_steps)
        else:
            if not isinstance(mode_save_configs, Mapping):
                raise HookConfigError("SaveConfig.mode_save_configs",
                                      f"expected a dict of mode -> SaveConfigMode, got {mode_save_configs!r}")
            for mode, value in mode_save_configs.items():
                if value is not None and not isinstance(value, SaveConfigMode):
                    raise HookConfigError("SaveConfig.mode_save_configs",
                                          f"the value for {mode!r} must be a SaveConfigMode, got {value!r}")
                configs[_mode_key(mode)] = value
            for mode in ModeKeys:
                configs.setdefault(mode, None)
        self.mode_save_configs = configs

    def get_save_config(self, mode: Any) -> SaveConfigMode:
        cfg = self.mode_save_configs.get(_mode_key(mode))
        return cfg if cfg is not None else SaveConfigMode()

    def set_save_config(self, mode: Any, save_config_mode: SaveConfigMode) -> None:
        if not isinstance(save_config_mode, SaveConfigMode):
            raise HookConfigError("SaveConfig.set_save_config", f"expected a SaveConfigMode, got {save_config_mode!r}")
        self.mode_save_configs[_mode_key(mode)] = save_config_mode

    def should_save_step(self, mode: Any, step_num: int) -> bool:
        return self.get_save_config(mode).should_save_step(step_num)

    def merge_default_save_config(self, default_save_config: SaveConfig) -> None:
        """Modes without a config take the default's (smdebug's rule for collections)."""
        for mode in ModeKeys:
            if self.mode_save_configs.get(mode) is None:
                self.mode_save_configs[mode] = default_save_config.get_save_config(mode)

    def to_json_dict(self) -> dict[str, Any]:
        return {mode.name: (cfg.to_json_dict() if cfg is not None else None)
                for mode, cfg in self.mode_save_configs.items()}

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[Any, Any] | None,
                  default_values: Mapping[str, Any] | None = None) -> SaveConfig | None:
        if params is None:
            return None
        configs: dict[Any, SaveConfigMode | None] = {}
        for mode, value in params.items():
            configs[_mode_key(mode)] = (value if value is None or isinstance(value, SaveConfigMode)
                                        else SaveConfigMode.from_dict(value, default_values))
        return cls(mode_save_configs=configs)

    @classmethod
    def from_json(cls, json_str: str) -> SaveConfig | None:
        return cls.from_dict(json.loads(json_str))

    @classmethod
    def from_save_config_mode(cls, save_config_mode: SaveConfigMode) -> SaveConfig:
        return cls(mode_save_configs={mode: save_config_mode for mode in ModeKeys})

    @classmethod
    def parse(cls, obj: Any) -> SaveConfig:
        """None, a SaveConfig, a SaveConfigMode (every mode) or a dict mode -> SaveConfigMode / dict."""
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls.from_save_config_mode(obj)
        if isinstance(obj, Mapping):
            parsed = cls.from_dict(obj)
            assert parsed is not None
            return parsed
        raise HookConfigError("save_config", f"expected a SaveConfig, SaveConfigMode or dict, got {obj!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return all(self.mode_save_configs.get(m) == other.mode_save_configs.get(m) for m in ModeKeys)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<class SaveConfig: {dict(self.mode_save_configs)}>"


__all__ = ["SaveConfig", "SaveConfigMode"]
