"""smdebug.pytorch.hook: smdebug 1.0's PyTorch `Hook`, a subclass of sdlocal's hook (hook.pytorch.Hook).

What users get is smdebug's: its constructor, `create_from_json_file`, `register_module` /
`register_hook`, `register_loss`, `save_scalar`, `save_tensor`, `get_collection(s)`,
`add_collection`, `set_mode`, `close`, mutable collections and configs (a change takes effect at
the next step), the GLOBAL mode until `set_mode` is called, and the methods subclasses override
or call: `forward_hook(module, inputs, outputs)`, `backward_hook(tname)`, `forward_pre_hook`,
`_write_inputs`, `_write_outputs`, `_save_for_tensor`, `_write_raw_tensor_simple`,
`_get_collections_to_save_for_step`, `module._module_name`, `module_maps`, `step`, `mode`,
`mode_steps`, `last_saved_step`; and `record_trace_events` (an event on the framework timeline,
when the job's profiler config enables it). A subclass that overrides `forward_hook` / `backward_hook` gets
them called for every module (the model's, its submodules, the registered losses) / every
parameter, as smdebug does; otherwise sdlocal's faster per-module hooks save the same names.

Where a training job runs (a hook config file exists): `out_dir=None` and SageMaker's
`/opt/ml/output/tensors` mean the job's tensors folder (smdebug requires an out_dir); other
SageMaker container paths (`/opt/ml/...`, a `tensorboard_dir` too) the job's same folder
(hook/_job_paths.py, shared with the XGBoost hook); any other out_dir is written as given and is
not uploaded to the job's debug-output.
"""
from __future__ import annotations

import errno
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sdlocal.hook import pytorch as engine
from sdlocal.hook._job_paths import job_tensorboard_dir, resolve_out_dir, resolve_tensorboard_dir
from sdlocal.hook._pytorch_state import GRADIENT_PREFIX, SCALAR_PREFIX, rank_and_world
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookConfigError, HookError
from sdlocal.trial.modes import ModeKeys, to_mode
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, changes
from smdebug.pytorch import _convert
from smdebug.pytorch.collection import Collection, CollectionManager

logger = logging.getLogger("smdebug")



def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    for v in value:
        out += _as_list(v)
    return out


def _as_tensor(value: Any) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))


class Hook(engine.Hook):
    GRADIENT_PREFIX = GRADIENT_PREFIX
    SCALAR_PREFIX = SCALAR_PREFIX
    INPUT_TENSOR_SUFFIX = "_input_"
    OUTPUT_TENSOR_SUFFIX = "_output_"
    ROLE_TENSORS_BY_NAME = False

    def __init__(self, out_dir: str | None = None, export_tensorboard: bool = False,
                 tensorboard_dir: str | None = None, dry_run: bool = False,
                 reduction_config: ReductionConfig | None = None, save_config: Any = None,
                 include_regex: list[str] | str | None = None, include_collections: list[str] | None = None,
                 save_all: bool = False, include_workers: str = "one") -> None:
        path = resolve_out_dir(out_dir, logger)
        if include_workers not in ("one", "all"):
            raise HookConfigError("include_workers", f"expected 'one' or 'all', got {include_workers!r}")
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            raise HookConfigError("reduction_config", f"expected a ReductionConfig, got {reduction_config!r}")
        self.export_tensorboard = bool(export_tensorboard)
        self.tensorboard_dir = resolve_tensorboard_dir(self.export_tensorboard, tensorboard_dir, path)
        self.dry_run = bool(dry_run)
        self.save_config = SaveConfig.parse(save_config)
        self.reduction_config = reduction_config if reduction_config is not None else ReductionConfig(save_raw_tensor=True)
        self.include_regex = include_regex
        self.save_all = bool(save_all)
        self.include_workers = include_workers
        self.collection_manager = CollectionManager()
        names = _as_list(include_collections) if include_collections is not None else []
        self.include_collections = list(dict.fromkeys([*names, "losses"]))
        if include_regex:
            self.collection_manager.get("default").include(_as_list(include_regex))
            self.include_collections.append("default")
        if self.save_all:
            self.collection_manager.get("all").include(".*")
            self.include_collections.append("all")
        for name in self.include_collections:  # sdlocal knows relu_output, labels, ...: created with that meaning
            if name in _convert.hc.OPTIONAL_REGEX:
                self.collection_manager.get(name)
        self.include_collections = list(dict.fromkeys(self.include_collections))
        self.module_maps: dict[torch.nn.Module, str] = {}
        self.module_set: set[torch.nn.Module] = set()
        self.has_registered_module = self.has_registered_loss_module = False
        self._extra_saved: set[str] = set()  # collections that save_tensor wrote to
        self._fwd_override = type(self).forward_hook is not Hook.forward_hook
        self._bwd_override = type(self).backward_hook is not Hook.backward_hook
        super().__init__(self._hook_config(path), out_dir=path, dry_run=self.dry_run,
                         tensorboard_dir=self.tensorboard_dir, tensorboard_from_job=False)
        self._explicit_mode = ModeKeys.GLOBAL  # smdebug: GLOBAL until set_mode
        self._built_at = changes()
        logger.info("Saving to %s", path)
        if self.tensorboard_dir is not None:
            logger.info("TensorBoard event files go to %s", self.tensorboard_dir)

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> Hook:  # type: ignore[override]
        """From debughookconfig.json: `json_file_path`, else `$SMDEBUG_CONFIG_FILE_PATH`, else
        SageMaker's path. No file: FileNotFoundError, as smdebug."""
        path = Path(json_file_path if json_file_path is not None else HookConfig.default_path())
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no hook config file", str(path))
        config = HookConfig.from_json_file(path)
        hook_params = json.loads(path.read_text()).get("HookParameters") or {}
        if "TRAINING_JOB_NAME" in os.environ:  # SageMaker: TensorBoard only with a TensorBoardOutputConfig
            tb_dir = job_tensorboard_dir()
            export = tb_dir is not None
        else:
            tb_dir = hook_params.get("tensorboard_dir")
            export = str(hook_params.get("export_tensorboard", "false")).lower() == "true"
        hook = cls(out_dir=config.local_path, export_tensorboard=export, tensorboard_dir=tb_dir,
                   reduction_config=_convert.to_reduction_config(config.reduction_config),
                   save_config=_convert.to_save_config(config.save_config),
                   include_regex=list(config.include_regex) or None,
                   include_collections=sorted(config.saved_collection_names), save_all=config.save_all,
                   include_workers=config.include_workers)
        for coll in _convert.to_collections(config).values():
            hook.collection_manager.add(coll)
        return hook

    # ------------------------------------------------------------------ config
    def _hook_config(self, path: Path) -> HookConfig:
        return _convert.to_hook_config(
            local_path=str(path), manager=self.collection_manager,
            saved=[*self.include_collections, *self._extra_saved], default_save=self.save_config,
            default_reduction=self.reduction_config, include_regex=tuple(_as_list(self.include_regex)),
            save_all=self.save_all, include_workers=self.include_workers,
            module_name=lambda m: getattr(m, "_module_name", None) or self.module_maps.get(m))

    def _rebuild(self) -> None:
        """The collections or configs changed: rebuild the engine's config and re-attach."""
        self._use_config(self._hook_config(self.out_dir))
        if self._pending and not self._started:  # saved before the first step: masks by name again
            self._pending = {n: (v, self._mask_of(n) if m else 0) for n, (v, m) in self._pending.items()}
        self._reattach()
        self._built_at = changes()

    def _on_step_start(self, module: torch.nn.Module, inputs: Any) -> None:
        if self._built_at != changes() and not self._closed:
            if self._pending and self._started:
                self._end_step()  # the previous step with the masks it was recorded with
            self._rebuild()
        super()._on_step_start(module, inputs)

    def forward_pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        """smdebug's step start (the registered model's forward pre-hook)."""
        self._on_step_start(module, inputs)

    def get_collection(self, name: str, create: bool = True) -> Collection:
        return self.collection_manager.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        return self.collection_manager.get_collections()

    def add_collection(self, collection: Collection) -> None:
        if not isinstance(collection, Collection):
            raise HookConfigError("add_collection", f"expected a smdebug.pytorch.Collection, got {collection!r}")
        self.collection_manager.add(collection)

    def set_mode(self, mode: Any) -> None:
        try:
            self._explicit_mode = to_mode(getattr(mode, "name", mode))
        except (ValueError, TypeError):
            raise HookConfigError("set_mode", f"invalid mode {mode!r}; valid modes are TRAIN, EVAL, PREDICT, "
                                  "GLOBAL (smdebug.modes)") from None

    # ------------------------------------------------------------------ registration
    def register_module(self, module: torch.nn.Module) -> None:
        if not isinstance(module, torch.nn.Module):
            raise HookError(f"Module type {type(module).__name__} must be type torch.nn.Module")
        if module is self._model:
            return
        for name, sub in module.named_modules():
            sub._module_name = name  # type: ignore[assignment]
            self.module_maps[sub] = name
            self.module_set.add(sub)
        top = module._get_name()
        module._module_name = top  # type: ignore[assignment]
        self.module_maps[module] = top
        self.has_registered_module = True
        self._rebuild()  # add_module_tensors needs the module names
        super().register_module(module)

    def register_hook(self, module: torch.nn.Module) -> None:
        """smdebug's alias of register_module."""
        self.register_module(module)

    def register_loss(self, loss_module: torch.nn.Module) -> None:
        if not isinstance(loss_module, torch.nn.Module):
            raise HookError(f"register_loss needs a torch.nn.Module (a loss), got {type(loss_module).__name__}")
        name = loss_module._get_name()
        loss_module._module_name = name  # type: ignore[assignment]
        self.module_maps[loss_module] = name
        self.module_set.add(loss_module)
        self.has_registered_loss_module = True
        super().register_loss(loss_module)

    def _forward_hook_for(self, module: torch.nn.Module, name: str, top: bool = False) -> Any:
        return self.forward_hook if self._fwd_override else super()._forward_hook_for(module, name, top)

    def _grad_hook(self, tname: str) -> Any:
        return self.backward_hook(tname) if self._bwd_override else super()._grad_hook(tname)

    # ------------------------------------------------------------------ what subclasses override / call
    def forward_hook(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        """After each module's forward: save `<module>_input_<i>` / `<module>_output_<i>`."""
        if not self._active:
            return
        name = getattr(module, "_module_name", None) or self.module_maps.get(module) or module._get_name()
        self._write_inputs(name, inputs)
        self._write_outputs(name, outputs)
        self.last_saved_step = self.step

    def backward_hook(self, tname: str) -> Any:
        """A tensor hook saving the gradient as `gradient/<tname>` (register it with
        `tensor.register_hook(hook.backward_hook(name))`)."""
        gname = self.GRADIENT_PREFIX + tname

        def back(grad: torch.Tensor | None) -> None:
            if grad is not None and self._active:
                self._save_for_tensor(gname, grad)

        return back

    def _write_inputs(self, name: str, inputs: Any) -> None:
        if self._active:
            self._record_nested(name + self.INPUT_TENSOR_SUFFIX, inputs)

    def _write_outputs(self, name: str, outputs: Any) -> None:
        if self._active:
            self._record_nested(name + self.OUTPUT_TENSOR_SUFFIX, outputs)

    def _save_for_tensor(self, tensor_name: str, tensor_value: Any, check_before_write: bool = True) -> None:
        """Save the tensor if a collection it belongs to is saved at this step (any of its
        collections with check_before_write=False)."""
        if not self._started:
            return
        mask = self._mask_of(tensor_name)
        hit = mask & self._active if check_before_write else mask
        if hit:
            self._record(tensor_name, _as_tensor(tensor_value), hit)

    def _write_raw_tensor_simple(self, tensor_name: str, tensor_value: Any, tensor_ref: Any = None,
                                 timestamp: float | None = None) -> None:
        """Save the raw tensor at this step, in no collection."""
        self._record(tensor_name, _as_tensor(tensor_value), 0)

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """A functional loss, saved as `<tensor_name>_output_0` (in `losses` when it ends in loss)."""
        self._write_outputs(tensor_name, tensor_value)

    def _get_collections_to_save_for_step(self) -> set[Collection]:
        active = self._active
        return {self.collection_manager.get(c.name) for bit, c in enumerate(self._colls) if active >> bit & 1}

    def _is_collection_being_saved_for_step(self, name: str) -> bool:
        return any(c.name == name for c in self._get_collections_to_save_for_step())

    @property
    def written_tensor_name_for_step(self) -> dict[str, int]:
        return self._io_counts

    def _get_worker_name(self) -> str:
        return f"worker_{rank_and_world()[0]}"

    def _get_num_workers(self) -> int:
        return rank_and_world()[1]

    # ------------------------------------------------------------------ explicit saving
    def save_scalar(self, name: str, value: Any, sm_metric: bool = False, timestamp: float | None = None) -> None:
        """Save `scalar/<name>` at the current step (sm_metric: SageMaker Metrics, not emitted
        locally). Shapes as smdebug's: a Python number is saved as shape (1,), a tensor as it is."""
        if self._closed:
            logger.warning("save_scalar(%r) after the hook was closed: not saved", name)
            return
        arr: Any = value if isinstance(value, torch.Tensor) else (
            np.array([value]) if np.isscalar(value) else np.asarray(value))
        if int(np.prod(arr.shape)) != 1:
            raise HookError(f"save_scalar({name!r}) needs a single value, got shape {tuple(arr.shape)}")
        # a tensor: a snapshot (on CUDA, copied without synchronizing the training thread)
        self._put(self.SCALAR_PREFIX + name, self._snapshot(arr), 0)

    def save_tensor(self, tensor_name: str, tensor_value: Any,  # type: ignore[override]
                    collections_to_write: str | list[str] = "default") -> None:
        names = _as_list(collections_to_write)
        try:
            value = _as_tensor(tensor_value)
        except (TypeError, ValueError, RuntimeError):
            logger.warning("save_tensor(%r): the value could not be converted into a numpy value", tensor_name)
            return
        for cname in names:
            self.collection_manager.get(cname).tensor_names.quiet_add(tensor_name)
            self._extra_saved.add(cname)
        super().save_tensor(tensor_name, value, names)

    def record_trace_events(self, timestamp: float, training_phase: str = "", op_name: str = "", phase: str = "X",
                            duration: float = 1, **kwargs: Any) -> None:
        """smdebug's: a complete event on the framework timeline, `timestamp` and `duration` in
        seconds, `kwargs` its args. Nothing when the job does not profile; only complete events
        ("X") are written (smdebug's instant and metadata events have no use in the rules)."""
        tl = self._timeline
        if tl is None:
            return
        if phase != "X":
            logger.debug("record_trace_events(phase=%r): only complete events are recorded", phase)
            return
        start = int(timestamp * 1_000_000)
        # Values JSON has (a tensor, NaN: their str), so the trace file stays readable everywhere.
        args = {k: v if isinstance(v, (int, str, bool)) or v is None or (isinstance(v, float) and math.isfinite(v))
                else str(v) for k, v in kwargs.items()}
        tl.record(str(training_phase), str(op_name), start, start + int(duration * 1_000_000), args or None)

    def _cleanup(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<{type(self).__module__}.{type(self).__name__} object at {hex(id(self))}>:(\n"
                f"    out_dir={self.out_dir},\n    tensorboard_dir={self.tensorboard_dir},\n"
                f"    step={self.step},\n    mode={self.mode},\n    mode_steps={self.mode_steps},\n"
                f"    include_collections={self.include_collections},\n    save_config={self.save_config},\n"
                f"    reduction_config={self.reduction_config},\n    save_all={self.save_all},\n"
                f"    dry_run={self.dry_run},\n)")

