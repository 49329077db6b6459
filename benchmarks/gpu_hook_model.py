"""The model of benchmarks/gpu_hook.py: torchvision's ResNet-18 when torchvision imports, else a
built-in ResNet-18 with the same layers and parameter shapes (11,689,512 parameters for 1,000
classes: the bytes a saved step holds are the same), and a mini ResNet for CPU runs. Depends on
torch only; torchvision is optional (the PyPI torchvision does not load with every torch build)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

RESNET18_PARAMETERS = 11_689_512


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)  # as torchvision's: overwrites the batch norm's output
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet with BasicBlocks: `blocks` per stage, `widths` per stage."""

    def __init__(self, blocks: tuple[int, ...] = (2, 2, 2, 2), widths: tuple[int, ...] = (64, 128, 256, 512),
                 num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages = []
        cin = widths[0]
        for i, (n, w) in enumerate(zip(blocks, widths, strict=True)):
            stage = [BasicBlock(cin, w, 1 if i == 0 else 2)] + [BasicBlock(w, w, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*stage))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@dataclass(frozen=True)
class ModelChoice:
    model: nn.Module
    description: str


def make_model(name: str) -> ModelChoice:
    """`resnet18`: torchvision's, else the built-in one (said in the description);
    `resnet18-builtin`: the built-in one; `mini`: a 4-stage ResNet of one block per stage, widths
    16-128, 10 classes (CPU runs)."""
    if name == "resnet18":
        try:
            import torchvision  # type: ignore[import-untyped]

            model = torchvision.models.resnet18(num_classes=1000)
            return ModelChoice(model, f"torchvision {torchvision.__version__} resnet18")
        except Exception as e:  # ImportError, or a torchvision built for another torch (RuntimeError)
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            model = ResNet()
            return ModelChoice(model, f"built-in ResNet-18 (torchvision's layers and parameter shapes;"
                                      f" torchvision not usable here: {reason})")
    if name == "resnet18-builtin":
        return ModelChoice(ResNet(), "built-in ResNet-18 (torchvision's layers and parameter shapes)")
    if name == "mini":
        return ModelChoice(ResNet((1, 1, 1, 1), (16, 32, 64, 128), num_classes=10),
                           "mini ResNet (BasicBlocks 1-1-1-1, widths 16-128, 10 classes)")
    raise ValueError(f"unknown model {name!r}: expected resnet18, resnet18-builtin or mini")


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
