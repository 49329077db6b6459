"""Patching a module when a script first imports it: the zero-code hook's way into XGBoost
(hook/_xgb_autoattach.py) and into Hugging Face's Trainer (hook/frameworks/hf.py), at no cost to
a job that never imports them."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType


class OnImport(importlib.abc.MetaPathFinder):
    """Calls `on_load(module)` right after the module `name` is first imported (then leaves)."""

    def __init__(self, name: str, on_load: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._on_load = on_load

    def install(self) -> None:
        module = sys.modules.get(self.name)
        if module is not None:
            self._on_load(module)
        elif self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        self.uninstall()  # find the real spec once, without us; patch once
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader, on_load = spec.loader, self._on_load

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
                return loader.create_module(spec)

            def exec_module(self, module: ModuleType) -> None:
                loader.exec_module(module)
                try:
                    on_load(module)
                except Exception as e:  # noqa: BLE001 - do no harm: the training runs without us
                    print(f"sdlocal hook: cannot attach to {fullname} ({e}): its loop is not followed",
                          file=sys.stderr)

        spec.loader = _Loader()
        return spec
