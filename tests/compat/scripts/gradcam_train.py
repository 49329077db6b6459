"""The Grad-CAM example's training script (cnn_class_activation_maps/entry_point/train.py), on a
tiny ResNet-like model and random images: CustomHook.create_from_json_file(), TRAIN, then EVAL
passes whose backward computes the gradients of the predicted class."""
import argparse

import custom_hook
import torch
import torch.nn as nn
import torch.optim as optim
from smdebug import modes


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=False)
        self.layer1 = nn.Sequential(Block(4, 8))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def train_model(epochs, steps, eval_steps):
    torch.manual_seed(0)
    model = ResNet()
    loss_function = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    hook = custom_hook.CustomHook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(loss_function)
    gen = torch.Generator().manual_seed(1)
    for _ in range(epochs):
        hook.set_mode(modes.TRAIN)
        model.train()
        for _ in range(steps):
            inputs = torch.rand(4, 3, 8, 8, generator=gen).requires_grad_()
            labels = torch.randint(0, 5, (4,), generator=gen)
            optimizer.zero_grad()
            loss = loss_function(model(inputs), labels)
            loss.backward()
            optimizer.step()
        hook.set_mode(modes.EVAL)
        model.eval()
        for _ in range(eval_steps):
            inputs = torch.rand(2, 3, 8, 8, generator=gen).requires_grad_()
            hook.image_gradients(inputs)
            outputs = model(inputs)
            predicted_class = outputs.data.max(1, keepdim=True)[1]
            agg = 0
            for i in range(outputs.shape[0]):
                agg += outputs[i, predicted_class[i]]
            model.zero_grad()
            agg.backward()
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--eval-steps", type=int, default=2)
    args, _ = parser.parse_known_args()
    train_model(args.epochs, args.steps, args.eval_steps)
    print("done")
