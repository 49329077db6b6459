"""smdebug's constructor API, as in smdebug's docs/pytorch.md and examples/pytorch/scripts/simple.py:
`Hook(out_dir, save_config=SaveConfig(...), include_collections=[...])`, a custom collection by
regex with its own ReductionConfig, `add_module_tensors`, `register_hook`, and a functional loss
recorded with `record_tensor_value`."""
import argparse

import smdebug.pytorch as smd
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from smdebug.pytorch import Hook, SaveConfig


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("conv1", nn.Conv2d(1, 4, 3, 1))
        self.add_module("relu0", nn.ReLU())
        self.add_module("max_pool", nn.MaxPool2d(2, stride=2))
        self.add_module("fc1", nn.Linear(4 * 5 * 5, 16))
        self.add_module("relu1", nn.ReLU())
        self.add_module("fc2", nn.Linear(16, 10))

    def forward(self, x):
        x = self.max_pool(self.relu0(self.conv1(x)))
        x = x.view(-1, 4 * 5 * 5)
        x = self.relu1(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def create_hook(output_dir, module, save_interval):
    hook = Hook(
        out_dir=output_dir,
        save_config=SaveConfig(save_interval=save_interval),
        include_collections=["weights", "gradients", "biases", "relu_activations", "fc1_io"],
    )
    relu = hook.get_collection("relu_activations")
    relu.include(".*relu.*_output")
    relu.reduction_config = smd.ReductionConfig(reductions=["mean", "max"], abs_norms=["l2"], save_raw_tensor=True)
    hook.get_collection("fc1_io").add_module_tensors(module.fc1, inputs=True, outputs=True)
    return hook


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smdebug_path", type=str, default="/opt/ml/output/tensors")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--save-interval", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Net()
    hook = create_hook(args.smdebug_path, model, args.save_interval)
    hook.register_hook(model)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for _ in range(args.steps):
        data = torch.rand(8, 1, 12, 12, generator=gen)
        target = torch.randint(0, 10, (8,), generator=gen)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        hook.record_tensor_value(tensor_name="nll_loss", tensor_value=loss)
        loss.backward()
        optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
