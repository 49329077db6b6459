"""A small torch regression, as a ModelTrainer or TrainingJob.create user writes it: hyperparameters
as arguments, the model into SM_MODEL_DIR, TensorBoard scalars into SageMaker's
/opt/ml/output/tensorboard (the TensorBoardOutputConfig's LocalPath)."""
import argparse
import os

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--lr", type=float, default=0.05)
args, _ = parser.parse_known_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
loss_fn = torch.nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
x = torch.randn(256, 8)
y = x @ torch.linspace(-1, 1, 8).unsqueeze(1)
try:
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(log_dir="/opt/ml/output/tensorboard")
except ImportError as e:  # a Python without tensorboard's dependencies
    print(f"no TensorBoard writer: {e}")
    writer = None
for step in range(args.steps):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss={loss.item():.5f}")
    if writer is not None:
        writer.add_scalar("train/loss", loss.item(), step)
if writer is not None:
    writer.close()
torch.save(model.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "model.pt"))
