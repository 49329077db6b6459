"""Healthy Hugging Face fine-tune, as the `run_glue` example trains one: a tiny BERT sequence
classifier built from a `BertConfig` (no download; BERT's own initialisation), trained by
transformers' `Trainer` (AdamW with linear warmup and decay, weight decay 0.01, gradient clipping at
1.0, evaluation every `--eval-every` steps) on a synthetic but learnable task: token sequences with
padding, labelled by which of two marker tokens occurs more often. Unchanged Trainer script: the
zero-code hook follows it through hook/frameworks/hf.py."""
from __future__ import annotations

import os
import tempfile

import torch
from _common import parse
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

args = parse(__doc__, steps=60, lr=0.001)
VOCAB, LENGTH, PAD, CLS, SEP, MARK_A, MARK_B = 64, 16, 0, 1, 2, 3, 4


class Markers(torch.utils.data.Dataset):
    """[CLS] tokens [SEP] [PAD]...: label 1 when marker A occurs more often than marker B."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(LENGTH // 2, LENGTH - 1, (n,), generator=g)
        body = torch.randint(5, VOCAB, (n, LENGTH), generator=g)
        marks = torch.randint(0, 6, (n, LENGTH), generator=g)  # a third of the tokens are markers
        body = torch.where(marks == 0, MARK_A, torch.where(marks == 1, MARK_B, body))
        positions = torch.arange(LENGTH)
        self.ids = torch.where(positions < lengths[:, None] - 1, body, PAD)
        self.ids[:, 0] = CLS
        self.ids[torch.arange(n), lengths - 1] = SEP
        self.mask = (positions < lengths[:, None]).long()
        counts = [(self.ids == m).sum(1) for m in (MARK_A, MARK_B)]
        self.labels = (counts[0] > counts[1]).long()
        keep = counts[0] != counts[1]  # no ties: every label has its reason in the sequence
        self.ids, self.mask, self.labels = self.ids[keep], self.mask[keep], self.labels[keep]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


# BERT-Tiny's shape (google/bert_uncased_L-2_H-128_A-2), a 64-token vocabulary. Not narrower: BERT's
# initializer_range (0.02) is set for its widths, and at 32 wide the attention query/key gradients
# of step 0 are ~1e-7, second order in that scale (1e-6 at 128 wide, 4e-5 at BERT-base's 768)
config = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=512, max_position_embeddings=LENGTH, num_labels=2, pad_token_id=PAD)
model = BertForSequenceClassification(config)
training_args = TrainingArguments(
    output_dir=os.environ.get("SM_OUTPUT_DATA_DIR") or tempfile.mkdtemp(prefix="hf-finetune-"),
    max_steps=args.steps, per_device_train_batch_size=16, per_device_eval_batch_size=32,
    learning_rate=args.lr, weight_decay=0.01, warmup_steps=max(1, args.steps // 10), lr_scheduler_type="linear", max_grad_norm=1.0,
    eval_strategy="steps", eval_steps=args.eval_every, logging_steps=args.eval_every, report_to="none",
    save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=args.seed,
)
trainer = Trainer(model=model, args=training_args, train_dataset=Markers(1024, args.seed + 1),
                  eval_dataset=Markers(128, args.seed + 2))
trainer.train()  # the Trainer prints its losses every --eval-every steps
