"""A Hugging Face Trainer whose DataLoader workers repeat each other's random augmentation
(--case buggy): the dataset draws its random token crops from its own NumPy generator made in
`__init__`, which every forked worker copies (the Trainer's `seed_worker` re-seeds the global
generators, not the dataset's own). --case fixed: the crops come from torch's generator, which
PyTorch seeds differently in each worker. Run by tests/hook/test_records_trainer.py under `sdlocal run`."""
import argparse
import os
import tempfile

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--case", default="buggy")
p.add_argument("--steps", type=int, default=16)
args, _ = p.parse_known_args()
torch.set_num_threads(1)
torch.manual_seed(0)
VOCAB, LENGTH = 64, 16
corpus = torch.randint(5, VOCAB, (4096,), generator=torch.Generator().manual_seed(1))


class Crops(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> dict:
        if args.case == "buggy":
            start = int(self.rng.integers(0, len(corpus) - LENGTH))
        else:
            start = int(torch.randint(0, len(corpus) - LENGTH, ()))
        ids = corpus[start:start + LENGTH]
        return {"input_ids": ids, "labels": (ids[0] < VOCAB // 2).long()}


model = BertForSequenceClassification(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=LENGTH, num_labels=2))
training_args = TrainingArguments(
    output_dir=os.environ.get("SM_OUTPUT_DATA_DIR") or tempfile.mkdtemp(), max_steps=args.steps,
    per_device_train_batch_size=8, learning_rate=1e-3, report_to="none", save_strategy="no", use_cpu=True,
    disable_tqdm=True, dataloader_num_workers=2, seed=0)
Trainer(model=model, args=training_args, train_dataset=Crops()).train()
