"""The pruning example's training script (pytorch_iterative_model_pruning/src/train.py):
CustomHook.create_from_json_file(), save_scalar(..., sm_metric=True) before training and after each
epoch, TRAIN and EVAL loops (the EVAL loop without no_grad, as there)."""
import argparse

import numpy as np
import pruning_custom_hook
import smdebug.pytorch as smd
import torch
import torch.nn as nn
import torch.optim as optim


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)  # the block's relu runs twice per step


class ResNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(BasicBlock(4))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def train(epochs, steps, eval_steps):
    torch.manual_seed(0)
    model = ResNet()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    params = 0
    for parameter in model.parameters():
        params += np.prod(parameter.size())
    criterion = torch.nn.CrossEntropyLoss()
    hook = pruning_custom_hook.CustomHook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(criterion)
    hook.save_scalar("parameters", params, sm_metric=True)
    gen = torch.Generator().manual_seed(1)
    for epoch in range(epochs):
        model.train()
        hook.set_mode(smd.modes.TRAIN)
        train_loss = 0
        for _ in range(steps):
            batch, label = torch.rand(4, 3, 8, 8, generator=gen), torch.randint(0, 5, (4,), generator=gen)
            model.zero_grad()
            loss = criterion(model(batch), label)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
        hook.save_scalar("loss", train_loss / steps, sm_metric=True)
        model.eval()
        hook.set_mode(smd.modes.EVAL)
        correct = total = 0
        for _ in range(eval_steps):
            batch, label = torch.rand(4, 3, 8, 8, generator=gen), torch.randint(0, 5, (4,), generator=gen)
            output = model(batch)
            criterion(output, label)
            _, predictions = output.max(1)
            correct += predictions.eq(label).sum().item()
            total += predictions.size(0)
        hook.save_scalar("accuracy", correct / total, sm_metric=True)
        print(f"epoch {epoch} acc {correct / total:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--eval-steps", type=int, default=2)
    args, _ = parser.parse_known_args()
    train(args.epochs, args.steps, args.eval_steps)
