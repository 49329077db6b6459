"""An unchanged Lightning script (no smdebug, no sdlocal): a small MLP classifies synthetic data,
its loss a function (`F.cross_entropy`), its validation loss only logged (`self.log`).
Run by tests/hook/test_frameworks.py under `sdlocal run`.

--case healthy | diverging (SGD, huge learning rate) | constant (lr 0, one repeated example).
"""
import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--case", default="healthy")
p.add_argument("--max-steps", type=int, default=12)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--val-every", type=int, default=4)
args = p.parse_args()
torch.manual_seed(0)


def data(n: int, seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    if args.case == "constant":
        x[:] = x[0]
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        lr = {"healthy": 0.05, "constant": 0.0, "diverging": 200.0}[args.case]
        return torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9 if args.case == "diverging" else 0.0)


loader = torch.utils.data.DataLoader(data(512, 1), batch_size=16, shuffle=args.case != "constant")
val = torch.utils.data.DataLoader(data(32, 2), batch_size=16)
trainer = L.Trainer(max_steps=args.max_steps, accumulate_grad_batches=args.grad_accum,
                    val_check_interval=args.val_every * args.grad_accum, check_val_every_n_epoch=None,
                    accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=2)
trainer.fit(Classifier(), loader, val)
print("done", trainer.global_step)
