"""Collection members found by module type or role, beside smdebug's name regexes.

smdebug puts a tensor in a collection only when its NAME matches the collection's include_regex:
`.*relu_output` then matches `layer0_relu_output_0` only because the module is *named* like that.
We also collect by what a module is, so that `nn.Sequential(nn.Linear(4, 8), nn.ReLU())` feeds
DeadRelu. The tensors keep smdebug's names (`1_output_0` for that ReLU); only their collection
membership (the collections file's `tensor_names`) is added.

| collection | members by type / role |
|---|---|
| `relu_input`, `relu_output` | inputs / outputs of `nn.ReLU` and `nn.ReLU6` (not LeakyReLU, PReLU, ELU, GELU: their outputs are not 0 when inactive) |
| `tanh_input`, `tanh_output` | inputs / outputs of `nn.Tanh` |
| `sigmoid_input`, `sigmoid_output` | inputs / outputs of `nn.Sigmoid` |
| `input_sequence` | inputs of `nn.Embedding` / `nn.EmbeddingBag` (token ids) |
| `inputs`, `outputs` | inputs / outputs of the registered (top-level) model: `<ModelClass>_input_0` ... |
| `input_image` | the model's first input `<ModelClass>_input_0`, when it is 4-D (N, C, H, W) |
| `labels`, `predictions` | per registered loss module: `<LossClass>_labels` (the target) and `<LossClass>_predictions` (the predicted class ids, see `labels_and_predictions`) |

Functional activations (`torch.relu(x)`) run no module and cannot be seen by any hook.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from sdlocal.hook.config import CollectionConfig

LABELS = "labels"
PREDICTIONS = "predictions"
MODEL_INPUTS = "inputs"
MODEL_OUTPUTS = "outputs"
INPUT_IMAGE = "input_image"
LABELS_SUFFIX = "_labels"
PREDICTIONS_SUFFIX = "_predictions"

_RELU: tuple[type[nn.Module], ...] = (nn.ReLU, nn.ReLU6)
# collection -> (module types, True for the module's inputs / False for its outputs)
BY_MODULE_TYPE: dict[str, tuple[tuple[type[nn.Module], ...], bool]] = {
    "relu_input": (_RELU, True),
    "relu_output": (_RELU, False),
    "tanh_input": ((nn.Tanh,), True),
    "tanh_output": ((nn.Tanh,), False),
    "sigmoid_input": ((nn.Sigmoid,), True),
    "sigmoid_output": ((nn.Sigmoid,), False),
    "input_sequence": ((nn.Embedding, nn.EmbeddingBag), True),
}

# Losses whose input is class scores (N, C, ...) and whose target is class ids (or probabilities).
_CLASS_SCORE_LOSSES: tuple[type[nn.Module], ...] = (nn.CrossEntropyLoss, nn.NLLLoss, nn.MultiMarginLoss)


def bit_of(colls: Sequence[CollectionConfig], name: str) -> int:
    """The mask bit of collection `name` among the hook's saved collections (0 if not saved)."""
    for bit, coll in enumerate(colls):
        if coll.name == name:
            return 1 << bit
    return 0


def type_bits(module: nn.Module, colls: Sequence[CollectionConfig]) -> tuple[int, int]:
    """(bits for the module's inputs, bits for its outputs) from the collections that take
    modules of its type. (0, 0) when no such collection is saved: then nothing is registered."""
    in_bits = out_bits = 0
    for bit, coll in enumerate(colls):
        spec = BY_MODULE_TYPE.get(coll.name)
        if spec is not None and isinstance(module, spec[0]):
            if spec[1]:
                in_bits |= 1 << bit
            else:
                out_bits |= 1 << bit
    return in_bits, out_bits


def labels_and_predictions(loss: nn.Module, inputs: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """What a loss call tells about labels and predictions, as saved in `labels` / `predictions`.

    - CrossEntropyLoss, NLLLoss, MultiMarginLoss: predictions = argmax of the scores over the class
      dimension (dim 1; dim 0 for an unbatched input); labels = the target's class ids (argmax over
      the class dimension when the target is class probabilities).
    - BCEWithLogitsLoss: predictions = (logit > 0); BCELoss: (probability > 0.5); labels =
      (target > 0.5). Class ids 0/1, as int64.
    - any other loss (regression): the raw input and target.
    So ClassImbalance's and Confusion's defaults (`argmax=False`: predictions are class ids) hold.
    Returns (None, None) when the call does not have an input and a target tensor.
    """
    if not isinstance(inputs, (tuple, list)) or len(inputs) < 2:
        return None, None
    scores, target = inputs[0], inputs[1]
    if not isinstance(scores, torch.Tensor) or not isinstance(target, torch.Tensor):
        return None, None
    scores, target = scores.detach(), target.detach()
    if isinstance(loss, _CLASS_SCORE_LOSSES):
        class_dim = 1 if scores.dim() >= 2 else 0
        predictions = scores.argmax(dim=class_dim)
        if target.is_floating_point() and target.shape == scores.shape:
            target = target.argmax(dim=class_dim)
        return _rows(target), _rows(predictions)
    if isinstance(loss, nn.BCEWithLogitsLoss):
        return _rows((target > 0.5).long()), _rows((scores > 0).long())
    if isinstance(loss, nn.BCELoss):
        return _rows((target > 0.5).long()), _rows((scores > 0.5).long())
    return _rows(target), _rows(scores)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """At least 1-D (one row per sample), so that calls within a step can be concatenated."""
    return t.reshape(1) if t.dim() == 0 else t
