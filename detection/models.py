"""Tiny CPU models and synthetic data sets for the detection runs (seconds each).

Module names follow smdebug's conventions so that the rules' default regexes find them by name
(`layer0_relu` → `layer0_relu_output_0`, `embedding0` → `embedding0_input_0`); the CNN uses
unnamed `nn.ReLU()` modules inside `nn.Sequential`, which the hook collects by module type.
"""
from __future__ import annotations

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


class MLP(nn.Module):
    """fc0 → layer0_<act> → ... → head. `act` is relu, tanh or sigmoid."""

    def __init__(self, features: int, hidden: int, layers: int, classes: int, act: str = "relu") -> None:
        super().__init__()
        acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
        width = features
        for i in range(layers):
            self.add_module(f"fc{i}", nn.Linear(width, hidden))
            self.add_module(f"layer{i}_{act}", acts[act]())
            width = hidden
        self.head = nn.Linear(width, classes)
        self.layers = layers
        self.act = act

    def linears(self) -> list[nn.Linear]:
        return [getattr(self, f"fc{i}") for i in range(self.layers)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.layers):
            x = getattr(self, f"layer{i}_{self.act}")(getattr(self, f"fc{i}")(x))
        out: torch.Tensor = self.head(x)
        return out


class ConvNet(nn.Module):
    """A small CNN on 3×8×8 images: conv → ReLU → pool → conv → ReLU → pool → linear."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(8 * 2 * 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.classifier(self.features(x).flatten(1))
        return out


class TextNet(nn.Module):
    """Embedding (`embedding0`, padding id 0) → mean over the non-padding tokens → linear."""

    def __init__(self, vocab: int = 50, dim: int = 16, classes: int = 2) -> None:
        super().__init__()
        self.embedding0 = nn.Embedding(vocab, dim, padding_idx=0)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        emb = self.embedding0(tokens)
        mask = (tokens != 0).unsqueeze(-1).float()
        pooled = (emb * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        out: torch.Tensor = self.head(pooled)
        return out


# ---------------------------------------------------------------------- data


def blobs(n: int, features: int, classes: int, gen: torch.Generator, *, spread: float = 1.0,
          weights: list[float] | None = None) -> Batch:
    """Gaussian blobs around random class centres (learnable, not trivially separable);
    `weights` skews the class frequencies (class imbalance)."""
    centres = torch.randn(classes, features, generator=gen) * 1.2
    if weights is None:
        y = torch.randint(0, classes, (n,), generator=gen)
    else:
        y = torch.multinomial(torch.tensor(weights), n, replacement=True, generator=gen)
    x = centres[y] + spread * torch.randn(n, features, generator=gen)
    return x, y


def images(n: int, classes: int, gen: torch.Generator) -> Batch:
    """3×8×8 images: one template per class plus noise, normalized per channel (mean 0, std 1)."""
    templates = torch.randn(classes, 3, 8, 8, generator=gen)
    y = torch.randint(0, classes, (n,), generator=gen)
    x = templates[y] + 1.5 * torch.randn(n, 3, 8, 8, generator=gen)
    mean = x.mean(dim=(0, 2, 3), keepdim=True)
    std = x.std(dim=(0, 2, 3), keepdim=True)
    return (x - mean) / std, y


def to_pixels(x: torch.Tensor) -> torch.Tensor:
    """The same images as raw 0-255 pixel values (the fault: inputs left unnormalized)."""
    return (x * 40.0 + 128.0).clamp(0.0, 255.0)


def sequences(n: int, length: int, vocab: int, gen: torch.Generator, *, min_len: int, max_len: int) -> Batch:
    """Token sequences padded with id 0 after a random length in [min_len, max_len]; the label
    says whether ids from the lower half of the vocabulary are the majority."""
    tokens = torch.randint(1, vocab, (n, length), generator=gen)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=gen)
    positions = torch.arange(length).unsqueeze(0)
    tokens = torch.where(positions < lengths.unsqueeze(1), tokens, torch.zeros_like(tokens))
    low = ((tokens > 0) & (tokens < vocab // 2)).sum(1)
    high = (tokens >= vocab // 2).sum(1)
    y = (low > high).long()
    return tokens, y


def relabel(y: torch.Tensor, fraction: float, classes: int, gen: torch.Generator) -> torch.Tensor:
    """Replace a `fraction` of the labels by random ones (noisy labels; 1.0: random labels)."""
    noisy = torch.rand(y.shape, generator=gen) < fraction
    random = torch.randint(0, classes, y.shape, generator=gen)
    return torch.where(noisy, random, y)

