"""The cases: each `run(trial_dir, variant)` trains a few seconds on CPU through the hook, as the
report it rebuilds describes ("buggy"), with the report's fix ("fixed"), or a healthy neighbour
("healthy", where a case has one). `CASES` lists them with the rule that should catch the bug and
the rule parameters a user states for it (what the job means to freeze)."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, Dataset

from detection import scenarios
from detection.realworld._train import batches, blobs, hook, mlp
from sdlocal.trial.modes import ModeKeys


def zero_grad_missing(trial_dir: Path, variant: str) -> None:
    """Gradients never reset: the training loop lacks `optimizer.zero_grad()`, so every step
    applies the sum of all gradients so far. Rebuilt from
    https://github.com/udacity/deep-learning-v2-pytorch/pull/160 ("We are missing zero_grad in
    example, which can cause gradients to accumulate") and https://github.com/pytorch/pytorch/issues/47175.
    healthy: gradient accumulation on purpose (4 micro-batches per step, zero_grad after each step)."""
    torch.manual_seed(1)
    x, y = blobs()
    model, crit = mlp(), nn.CrossEntropyLoss()
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    accumulate = 4 if variant == "healthy" else 1
    for epoch in range(2):
        for i, (xb, yb) in enumerate(batches(x, y, 32, epoch)):
            if variant == "fixed":
                opt.zero_grad()
            loss = crit(model(xb), yb) / accumulate
            loss.backward()
            if (i + 1) % accumulate == 0:
                opt.step()
                if variant == "healthy":
                    opt.zero_grad()
    h.close()


def eval_in_train_mode(trial_dir: Path, variant: str) -> None:
    """Validation run in training mode: the evaluation loop uses `torch.no_grad()` but never calls
    `model.eval()`, so dropout stays active and batch norm normalises with (and updates its
    statistics from) validation batches. Rebuilt from https://github.com/sinhasam/vaal/issues/2
    ("the task_model is vgg16_bn which has batchnorm and dropout layers, so it is must to make the
    task_model in eval mode before testing") and https://github.com/udacity/deep-learning-v2-pytorch/issues/3.
    healthy: a GAN-style no-grad forward in training mode once per training step (not an evaluation)."""
    torch.manual_seed(2)
    x, y = blobs(seed=2)
    xv, yv = blobs(n=96, seed=3)
    model, crit = mlp(), nn.CrossEntropyLoss()
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        model.train()
        for xb, yb in batches(x, y, 32, epoch):
            if variant == "healthy":
                with torch.no_grad():
                    model(xb)  # e.g. a generator's samples for the discriminator
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()
        if variant == "fixed":
            model.eval()
        if variant != "healthy":
            with torch.no_grad():
                for xb, yb in batches(xv, yv, 32, 0):
                    crit(model(xb), yb)
    h.close()


class RandomPatches(Dataset):
    """Random crops of one fixed volume, as patch-based segmentation trains; the crop positions
    come from the dataset's own NumPy generator."""

    def __init__(self) -> None:
        self.volume = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        self.rng = np.random.default_rng(1)

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        r, c = self.rng.integers(0, 48, size=2)
        patch = torch.from_numpy(self.volume[r:r + 16, c:c + 16].reshape(-1).copy())
        return patch, torch.tensor(int(patch.mean() > 0))


def _reseed(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    assert info is not None
    info.dataset.rng = np.random.default_rng(torch.initial_seed() % 2**32)  # type: ignore[attr-defined]


def numpy_seed_workers(trial_dir: Path, variant: str) -> None:
    """DataLoader workers repeating each other's augmentation: every forked worker inherits the same
    NumPy random state, so the workers draw the same random crops (and again each epoch).
    Rebuilt from https://github.com/pytorch/pytorch/issues/5059 ("np.random generates the same
    random numbers for each data batch"), https://github.com/wolny/pytorch-3dunet/issues/32 (random
    rotations identical across workers) and https://github.com/open-mmlab/OpenPCDet/issues/886.
    PyTorch >= 1.9 seeds the global NumPy generator in each worker, so the case draws from the
    dataset's own `np.random.default_rng` made in `__init__`, which every worker still copies (the
    form the bug keeps today). Fixed: `worker_init_fn` re-seeding it from `torch.initial_seed()`
    (PyTorch's FAQ on workers returning identical random numbers)."""
    torch.manual_seed(3)
    loader = DataLoader(RandomPatches(), batch_size=8, num_workers=2,
                        worker_init_fn=_reseed if variant == "fixed" else None,
                        multiprocessing_context="fork")
    model = nn.Sequential(nn.Linear(256, 32), nn.ReLU(), nn.Linear(32, 2))
    crit = nn.CrossEntropyLoss()
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()
    h.close()


class StagedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.stage2 = nn.Sequential(nn.Linear(32, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Linear(32, 4)
        self.frozen_stages = 1
        self.keep_frozen_in_eval = False

    def freeze_stages(self) -> None:
        if self.frozen_stages >= 1:
            self.stage1.eval()
            for p in self.stage1.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> StagedNet:
        super().train(mode)
        if self.keep_frozen_in_eval:  # the fix: frozen stages stay in eval mode
            self.freeze_stages()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stage2(self.stage1(x)))


def frozen_stages_bn(trial_dir: Path, variant: str) -> None:
    """A frozen stage that still trains its batch norm: `frozen_stages=1` freezes stage 1's weights
    and puts it in eval mode once, but `model.train()` at each epoch puts its BatchNorm back in
    training mode, which keeps updating its running statistics. Rebuilt from
    https://github.com/open-mmlab/mmdetection/pull/560 ("If BN is not fixed and frozen_stages is not
    -1, BN layers in the first stages will run in the training mode"). Fixed: `train()` re-applies
    the freezing, as mmdetection's backbones do."""
    torch.manual_seed(4)
    x, y = blobs(seed=4)
    model, crit = StagedNet(), nn.CrossEntropyLoss()
    model.keep_frozen_in_eval = variant == "fixed"
    model.freeze_stages()
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
    for epoch in range(2):
        model.train()
        for xb, yb in batches(x, y, 32, epoch):
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()
    h.close()


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(16, 32), nn.BatchNorm1d(32)
        self.fc2, self.bn2 = nn.Linear(32, 32), nn.BatchNorm1d(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn2(self.fc2(torch.relu(self.bn1(self.fc1(x))))))


class Transfer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone, self.head = Backbone(), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def bn_transfer(trial_dir: Path, variant: str) -> None:
    """Transfer learning where everything but batch norm is frozen: the backbone is frozen layer by
    layer by type (the linear/conv layers only), so its BatchNorm layers keep training their
    weights and running statistics. Rebuilt from https://github.com/tianweiy/CenterPoint/issues/168
    (a frozen stage whose BatchNorm1d running_mean/var are not frozen: "yes, that's a bug"). The
    job states what it freezes (`frozen_regex=^backbone\\.`), as a config's frozen stages do.
    Fixed: every backbone parameter frozen and the backbone kept in eval mode."""
    torch.manual_seed(5)
    x, y = blobs(seed=5)
    model, crit = Transfer(), nn.CrossEntropyLoss()
    for m in model.backbone.modules():
        if variant == "fixed" or isinstance(m, nn.Linear):
            for p in m.parameters(recurse=False):
                p.requires_grad = False
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for epoch in range(2):
        model.train()
        if variant == "fixed":
            model.backbone.eval()
        for xb, yb in batches(x, y, 32, epoch):
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()
    h.close()


class LazyHead(nn.Module):
    """A head whose layer is made at its first forward (its input size read from the data)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1))
        self.register_parameter("unused", None)
        self.proj: nn.Linear | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        if self.proj is None:
            self.proj = nn.Linear(h.shape[1], 4)
        return self.proj(h)


def lazy_head_eval(trial_dir: Path, variant: str) -> None:
    """A module evaluated before its lazy initialisation: the head's layer is created at its first
    forward, which is a sanity-check evaluation run after the optimizer was made, so the optimizer
    never holds (never trains) the head. Rebuilt from https://github.com/prism-science/sampleworks/pull/313
    (a parameter slot "filled on first forward once the shape is known", flagged because the
    optimizer is set up before it exists) and https://github.com/LaurentMazare/ocaml-torch/issues/36
    (optimizer created before the layer: the loss never moves). Fixed: a dry-run training forward
    before the optimizer is made (PyTorch's advice for lazy modules)."""
    torch.manual_seed(6)
    x, y = blobs(seed=6)
    xv, yv = blobs(n=64, seed=7)
    model, crit = LazyHead(), nn.CrossEntropyLoss()
    h = hook(trial_dir)
    h.register_module(model)
    h.register_loss(crit)
    if variant == "fixed":
        model(x[:2])  # the dry run
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model.eval()
    with torch.no_grad():
        crit(model(xv), yv)  # the sanity check before training
    for epoch in range(2):
        model.train()
        for xb, yb in batches(x, y, 32, epoch):
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()
    h.close()


def _ddp_worker(rank: int, world: int, init_file: str, trial_dir: str, variant: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.manual_seed(7)
        model, crit = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), nn.CrossEntropyLoss()
        ddp = nn.parallel.DistributedDataParallel(model)
        h = hook(Path(trial_dir))
        h.register_module(model)
        h.register_loss(crit)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        x, y = blobs(seed=8)
        x, y = x[rank::world], y[rank::world]
        for epoch in range(2):
            for i, (xb, yb) in enumerate(batches(x, y, 16, epoch)):
                opt.zero_grad()
                # the bug: some steps call the wrapped module directly (no gradient synchronisation)
                out = model(xb) if variant == "buggy" and i % 2 else ddp(xb)
                crit(out, yb).backward()
                opt.step()
        h.close()
    finally:
        dist.destroy_process_group()


def ddp_drift(trial_dir: Path, variant: str) -> None:
    """Data-parallel replicas drifting apart: the DDP wrapper is used on some steps only (others call
    `model.module`-style the wrapped model directly, e.g. a second loss term or an auxiliary pass),
    so those steps' gradients are not averaged and each rank applies its own. Rebuilt from
    https://github.com/jia-zhuang/pytorch-multi-gpu-training/issues/7 (parameters not the same on
    every GPU under DDP) and the DDP notes' warning that forward must go through the wrapper.
    2 processes, gloo on CPU. Fixed: every step through the DDP wrapper."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_ddp_worker, args=(2, os.path.join(tmp, "init"), str(trial_dir), variant), nprocs=2, join=True)


def _healthy(setup_fn: Callable[[], Any]) -> Callable[[Path, str], None]:
    def run(trial_dir: Path, variant: str) -> None:
        """The detection matrix's healthy run, trained as detection/training.py trains it (batches in
        the same order every pass, `zero_grad` after the forward, EVAL passes by `set_mode`)."""
        setup = setup_fn()
        model, crit = setup.model, nn.CrossEntropyLoss()
        h = hook(trial_dir)
        h.register_module(model)
        h.register_loss(crit)
        opt = torch.optim.SGD(model.parameters(), lr=setup.lr, momentum=setup.momentum)
        (x, y), (xv, yv) = setup.train, setup.val
        bs = setup.batch_size
        n_batches = max(len(x) // bs, 1)
        for step in range(setup.steps):
            h.set_mode(ModeKeys.TRAIN)
            model.train()
            i = (step % n_batches) * bs
            loss = crit(model(x[i:i + bs]), y[i:i + bs])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if setup.eval_every and (step + 1) % setup.eval_every == 0:
                h.set_mode(ModeKeys.EVAL)
                model.eval()
                with torch.no_grad():
                    for b in range(setup.eval_batches):
                        crit(model(xv[b * 128:(b + 1) * 128]), yv[b * 128:(b + 1) * 128])
        h.close()
    return run


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Path, str], None]
    rule: str  # the rule whose firing is this bug caught for its own reason
    variants: tuple[str, ...] = ("buggy", "fixed")
    params: dict[str, dict[str, str]] = field(default_factory=dict)  # rule -> parameters the job states
    slow: bool = False  # needs processes of its own (the CI subset leaves it to tests of its own)


CASES: tuple[Case, ...] = (
    Case("zero_grad_missing", zero_grad_missing, "GradientsNotReset", ("buggy", "fixed", "healthy")),
    Case("eval_in_train_mode", eval_in_train_mode, "EvaluationMisuse", ("buggy", "fixed", "healthy")),
    Case("numpy_seed_workers", numpy_seed_workers, "RepeatedBatches", slow=True),
    Case("frozen_stages_bn", frozen_stages_bn, "FrozenParametersChanged"),
    Case("bn_transfer", bn_transfer, "FrozenParametersChanged",
         params={"FrozenParametersChanged": {"frozen_regex": r"^backbone\."}}),
    Case("lazy_head_eval", lazy_head_eval, "ParametersNotTraining"),
    Case("ddp_drift", ddp_drift, "ReplicaDivergence", slow=True),
    # healthy pipelines: the detection matrix's (an MLP, a CNN, an embedding text model)
    Case("healthy_mlp", _healthy(scenarios.healthy_mlp), "", ("healthy",)),
    Case("healthy_cnn", _healthy(scenarios.healthy_cnn), "", ("healthy",)),
    Case("healthy_text", _healthy(scenarios.healthy_text), "", ("healthy",)),
)
