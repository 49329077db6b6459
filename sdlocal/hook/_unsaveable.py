"""Tensors the hook cannot copy or save, skipped (do no harm: the training goes on without them).

Nested tensors (an `nn.TransformerEncoder` evaluated with a padding mask takes PyTorch's fast path
and returns one), sparse and other non-strided layouts (an `nn.Embedding(sparse=True)`'s
gradients), meta tensors, quantized tensors and `DTensor`s are not saved: each tensor name is said
once, in one line naming it and why, and then skipped silently.
"""
from __future__ import annotations

import logging

import torch

logger = logging.getLogger("sdlocal.hook")

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_said: set[str] = set()


def why_unsaveable(tensor: torch.Tensor) -> str | None:
    """Why the hook cannot save `tensor`, or None when it can."""
    if tensor.is_nested:
        return "a nested tensor"
    if tensor.layout is not torch.strided:
        return f"a {str(tensor.layout).removeprefix('torch.')} tensor"
    if tensor.is_meta:
        return "a meta tensor (no data)"
    if tensor.is_quantized:
        return "a quantized tensor"
    if type(tensor) not in _PLAIN and type(tensor).__name__ == "DTensor":
        return "a DTensor (sharded across ranks)"
    return None


def unsaveable(name: str, tensor: torch.Tensor) -> bool:
    """True (after one line naming it, the first time) when `tensor` cannot be saved as `name`."""
    why = why_unsaveable(tensor)
    if why is None:
        return False
    skipped(name, why)
    return True


def skipped(name: str, why: str) -> None:
    if name not in _said:
        _said.add(name)
        logger.warning("sdlocal hook: %s is %s: not saved (the training goes on)", name, why)
