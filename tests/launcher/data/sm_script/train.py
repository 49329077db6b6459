"""A training script written the way the AWS SageMaker examples write them: argparse defaults from the
training toolkit's SM_* variables, data read from the channel folders, the model saved to
SM_MODEL_DIR. It also records what it saw (environment, arguments, channel files) in
SM_OUTPUT_DATA_DIR/seen.json, which SageMaker publishes as output.tar.gz, for the tests to check.
"""
import argparse
import csv
import glob
import json
import os
import sys

import torch
from torch import nn


def load(folder):
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.csv"), recursive=True)):
        with open(path) as f:
            rows += [[float(v) for v in row] for row in csv.reader(f) if row]
    data = torch.tensor(rows)
    return data[:, :-1], data[:, -1].long()


def train(args):
    torch.manual_seed(args.seed)  # the accuracy check must not depend on a lucky initialization
    x, y = load(args.data_dir)
    test_x, test_y = load(args.test_dir)
    model = nn.Sequential(nn.Linear(x.shape[1], 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for start in range(0, len(x), args.batch_size):
            optimizer.zero_grad()
            loss = loss_fn(model(x[start:start + args.batch_size]), y[start:start + args.batch_size])
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    if args.fail:
        raise ValueError(f"asked to fail after training (accuracy {accuracy:.2f})")
    torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pth"))
    channels = {name: sorted(os.path.relpath(p, os.environ[f"SM_CHANNEL_{name.upper()}"])
                             for p in glob.glob(os.path.join(os.environ[f"SM_CHANNEL_{name.upper()}"], "**", "*"),
                                                recursive=True) if os.path.isfile(p))
                for name in json.loads(os.environ["SM_CHANNELS"])}
    seen = {"argv": sys.argv, "cwd": os.getcwd(), "hosts": args.hosts, "current_host": args.current_host,
            "num_gpus": args.num_gpus, "accuracy": accuracy, "channel_files": channels,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("SM_", "MY_", "TRAINING_JOB"))}}
    with open(os.path.join(args.output_data_dir, "seen.json"), "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--fail", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    # the container environment
    parser.add_argument("--hosts", type=list, default=json.loads(os.environ["SM_HOSTS"]))
    parser.add_argument("--current-host", type=str, default=os.environ["SM_CURRENT_HOST"])
    parser.add_argument("--model-dir", type=str, default=os.environ["SM_MODEL_DIR"])
    parser.add_argument("--data-dir", type=str, default=os.environ["SM_CHANNEL_TRAINING"])
    parser.add_argument("--test-dir", type=str, default=os.environ["SM_CHANNEL_TEST"])
    parser.add_argument("--output-data-dir", type=str, default=os.environ["SM_OUTPUT_DATA_DIR"])
    parser.add_argument("--num-gpus", type=int, default=os.environ["SM_NUM_GPUS"])
    train(parser.parse_args())
