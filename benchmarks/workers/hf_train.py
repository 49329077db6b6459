"""One timed Hugging Face Trainer run for benchmarks/hf_trainer.py, under `python -m sdlocal.hook.run`
(the zero-code hook attached when SMDEBUG_CONFIG_FILE_PATH names a config, else none).

A tiny BERT built from a config (2 layers, hidden 128, 2 heads, vocab 1000, 32 tokens, batch 16,
1 thread), synthetic data, AdamW. Timed: from the first optimizer step after `--warmup` to the end
of training plus the hook's close (so a hook cannot look fast by leaving work queued). Prints one
JSON line: {"seconds", "steps", "ms_per_step", "cpu_ms_per_step"} (CPU: the whole process, the
hook's writer thread included; steadier than wall time on a shared machine).
"""
import argparse
import json
import time

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--warmup", type=int, default=20)
p.add_argument("--out", default="/tmp/hf-bench")
args = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
VOCAB, LEN, BATCH = 1000, 32, 16
model = BertForSequenceClassification(BertConfig(
    vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
    max_position_embeddings=LEN, num_labels=2))


class Data(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(1, VOCAB, (n, LEN))
        self.labels = (self.ids[:, 0] < VOCAB // 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Clock(TrainerCallback):
    start = cpu = 0.0

    def on_step_begin(self, a, state, control, **kw):
        if state.global_step == args.warmup:
            self.start, self.cpu = time.perf_counter(), time.process_time()


clock = Clock()
trainer = Trainer(model=model, train_dataset=Data(BATCH * (args.steps + args.warmup)), callbacks=[clock],
                  args=TrainingArguments(output_dir=args.out, max_steps=args.steps + args.warmup,
                                         per_device_train_batch_size=BATCH, logging_steps=50, report_to="none",
                                         save_strategy="no", use_cpu=True, disable_tqdm=True,
                                         dataloader_num_workers=0, seed=0))
trainer.train()
try:
    from sdlocal.hook import _current

    hook = _current.current()
    if hook is not None:
        hook.close()  # inside the timed span
except ImportError:
    pass
seconds, cpu = time.perf_counter() - clock.start, time.process_time() - clock.cpu
print(json.dumps({"seconds": seconds, "steps": args.steps, "ms_per_step": 1000 * seconds / args.steps,
                  "cpu_ms_per_step": 1000 * cpu / args.steps}))
