"""A small training that exercises every kind of saved tensor, for the save-path tests (CPU here,
CUDA in test_cuda_saves.py): weights, biases, gradients, module outputs overwritten in place by
the next module (`ReLU(inplace=True)`), reductions only, losses, labels/predictions from two loss
calls, a scalar; an optimizer whose step changes the weights in place (SGD with momentum and
weight decay) and `zero_grad(set_to_none=False)`, which zeroes the gradients in place.

`train` records by hand, before anything can change them, the values the hook must save."""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys

WIDTH = 64


def make_model(device: str = "cpu") -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(
        fc0=nn.Linear(12, WIDTH), relu=nn.ReLU(inplace=True), fc1=nn.Linear(WIDTH, WIDTH), act=nn.Tanh(),
        head=nn.Linear(WIDTH, 4))).to(device)


def config(out: Path, interval: int) -> HookConfig:
    colls: list[tuple[str, dict[str, Any]]] = [
        ("weights", {}), ("biases", {}), ("gradients", {}), ("losses", {}), ("labels", {}), ("predictions", {}),
        ("relu_output", {}),
        ("fc0_out", {"include_regex": "^fc0_output_0$"}),  # the Linear's output, before ReLU overwrites it
        ("head_reduced", {"include_regex": "^head_output_0$", "reductions": "mean,l2_norm,abs_max,variance",
                          "save_raw_tensor": "false"}),
    ]
    return HookConfig.from_dict({
        "LocalPath": str(out), "HookParameters": {"save_interval": str(interval)},
        "CollectionConfigurations": [{"CollectionName": n, "CollectionParameters": p} for n, p in colls]})


def train(hook: Hook, steps: int, device: str = "cpu", eval_steps: int = 1,
          forbid_sync: bool = False) -> dict[str, dict[int, np.ndarray]]:
    """Trains `steps` TRAIN steps then `eval_steps` EVAL steps; returns, per tensor name, the value
    at every TRAIN step recorded by hand (clones on the device, made where the hook sees them).
    `forbid_sync` (CUDA): the steps run under torch.cuda.set_sync_debug_mode("error"), so any call
    that synchronizes the training thread with the device raises (the batches are on the device
    before, the hand-made records are fetched after)."""
    model, loss_fn = make_model(device), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-3)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 12, generator=gen).to(device), torch.randint(0, 4, (16,), generator=gen).to(device))
               for _ in range(steps + eval_steps)]
    by_hand: dict[str, dict[int, torch.Tensor]] = {}
    step = [0]

    def keep(name: str, t: torch.Tensor) -> None:
        if step[0] < 0:  # the EVAL steps: not recorded
            return
        by_hand.setdefault(name, {})[step[0]] = t.detach().clone()

    model.fc0.register_forward_hook(lambda m, i, o: keep("fc0_output_0", o))
    loss_calls = [0]

    def keep_loss(m: nn.Module, i: Any, o: torch.Tensor) -> None:
        keep(f"CrossEntropyLoss_output_{loss_calls[0]}", o)
        loss_calls[0] += 1

    loss_fn.register_forward_hook(keep_loss)
    hook.set_mode(ModeKeys.TRAIN)
    previous = torch.cuda.get_sync_debug_mode() if forbid_sync else 0
    if forbid_sync:
        torch.cuda.set_sync_debug_mode("error")
    try:
        _steps(hook, model, loss_fn, opt, batches, steps, step, loss_calls, keep)
    finally:
        if forbid_sync:
            torch.cuda.set_sync_debug_mode(previous)
    hook.close()
    return {name: {s: v.cpu().numpy() for s, v in vals.items()} for name, vals in by_hand.items()}


def _steps(hook: Hook, model: nn.Module, loss_fn: nn.Module, opt: torch.optim.Optimizer,
           batches: list[tuple[torch.Tensor, torch.Tensor]], steps: int, step: list[int], loss_calls: list[int],
           keep: Any) -> None:
    for s in range(steps):
        step[0] = s
        x, y = batches[s]
        for pname, p in model.named_parameters():
            keep(f"Sequential_{pname}", p)
        opt.zero_grad(set_to_none=False)
        loss_calls[0] = 0
        out = model(x)
        loss = loss_fn(out[:8], y[:8]) + loss_fn(out[8:], y[8:])  # two loss calls: their rows appended
        loss.backward()
        for pname, p in model.named_parameters():
            assert p.grad is not None
            keep(f"gradient/Sequential_{pname}", p.grad)
        opt.step()  # in place: the weights the hook saved at this step change now
        hook.save_scalar("lr", 0.3)
    step[0] = -1
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for x, _ in batches[steps:]:
            model(x)


def all_values(path: Path) -> dict[tuple[str, int], np.ndarray]:
    """Every raw value and every saved reduction of a trial, read back with our reader."""
    tr = create_trial(path)
    out: dict[tuple[str, int], np.ndarray] = {}
    for name in tr.tensor_names():
        t = tr.tensor(name)
        for s in t.steps():
            try:
                out[(name, s)] = t.value(s)
            except Exception:  # reductions-only steps have no raw value
                pass
            for (red, is_abs), val in t.reduction_values(s).items():
                out[(f"{name}/{'abs_' if is_abs else ''}{red}", s)] = np.asarray(val)
    return out


def digest(value: Any) -> list[Any]:
    """dtype, shape and sha256 of a value's bytes: what 'bit-identical' compares."""
    arr = np.ascontiguousarray(value)
    return [str(arr.dtype), list(arr.shape), hashlib.sha256(arr.tobytes()).hexdigest()]


# Run by the smdebug side virtualenv: every raw value of a trial, digested as `digest` does.
SMDEBUG_DIGESTS = r"""
import hashlib, json, sys
import numpy as np
from smdebug.trials import create_trial
tr = create_trial(sys.argv[1])
out = {}
for name in tr.tensor_names():
    t = tr.tensor(name)
    for s in t.steps():
        try:
            v = np.ascontiguousarray(t.value(s))
        except Exception:
            continue
        out[f"{name}@{s}"] = [str(v.dtype), list(v.shape), hashlib.sha256(v.tobytes()).hexdigest()]
print(json.dumps(out))
"""
