"""The SageMaker script-mode pattern (pytorch_model_debugging/scripts/pytorch_mnist.py):
`Hook.create_from_json_file()`, `register_hook`, `register_loss`, `set_mode` TRAIN/EVAL."""
import argparse

import smdebug.pytorch as smd
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.fc1 = nn.Linear(4 * 10 * 10, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, loss_fn, optimizer, hook, gen, steps):
    model.train()
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(steps):
        data, target = torch.rand(8, 1, 12, 12, generator=gen), torch.randint(0, 10, (8,), generator=gen)
        optimizer.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        optimizer.step()


def test(model, loss_fn, hook, gen, steps):
    model.eval()
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(steps):
            data, target = torch.rand(8, 1, 12, 12, generator=gen), torch.randint(0, 10, (8,), generator=gen)
            loss_fn(model(data), target).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--eval-steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net()
    loss_fn = nn.NLLLoss()
    hook = smd.Hook.create_from_json_file()
    hook.register_hook(model)
    hook.register_loss(loss_fn)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(args.epochs):
        train(model, loss_fn, optimizer, hook, gen, args.steps)
        test(model, loss_fn, hook, gen, args.eval_steps)
    print("done")


if __name__ == "__main__":
    main()
