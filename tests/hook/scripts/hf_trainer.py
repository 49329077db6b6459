"""An unchanged Hugging Face Trainer script (no smdebug, no sdlocal): a tiny BERT built from a
config classifies synthetic token sequences. Run by tests/hook/test_frameworks.py under `sdlocal run`.

--case healthy: learnable labels, AdamW; diverging: SGD with a huge learning rate and no clipping
(the loss climbs); constant: one repeated example, lr 0, no dropout (the loss is exactly constant);
vanishing: weights initialized ~1e-9 (vanishing gradients). --smdebug-callback: the script's own
smdebug TrainerCallback (create_from_json_file, register_module), as SageMaker's examples write.
"""
import argparse
import json
import os

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

p = argparse.ArgumentParser()
p.add_argument("--case", default="healthy")
p.add_argument("--max-steps", type=int, default=12)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--eval-steps", type=int, default=0)
p.add_argument("--report-to", default="none")
p.add_argument("--smdebug-callback", default="false")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--max-grad-norm", type=float, default=1.0)
args = p.parse_args()

torch.manual_seed(0)
VOCAB, LEN = 40, 8
config = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=LEN, num_labels=2,
                    initializer_range=1e-9 if args.case == "vanishing" else 0.02,
                    hidden_dropout_prob=0.0 if args.case == "constant" else 0.1,
                    attention_probs_dropout_prob=0.0 if args.case == "constant" else 0.1)
model = BertForSequenceClassification(config)


class Data(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (n, LEN), generator=g)
        if args.case == "constant":
            self.ids[:] = self.ids[0]
        self.labels = (self.ids[:, 0] < VOCAB // 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LEN, dtype=torch.long),
                "labels": self.labels[i]}


callbacks = []
if args.smdebug_callback.lower() == "true":  # the toolkit passes JSON true as "True"
    import smdebug.pytorch as smd

    class SmdebugCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.hook = smd.Hook.create_from_json_file()
            self.hook.register_module(model)

    callbacks.append(SmdebugCallback())

optimizers = (None, None)
lr = {"healthy": 5e-3, "vanishing": 1e-3, "constant": 0.0, "diverging": 50.0}[args.case]
if args.case == "diverging":
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    optimizers = (opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0))
training_args = TrainingArguments(
    output_dir=os.environ.get("SM_OUTPUT_DATA_DIR", "/tmp/hf-out"), max_steps=args.max_steps,
    per_device_train_batch_size=args.batch, per_device_eval_batch_size=args.batch,
    gradient_accumulation_steps=args.grad_accum, learning_rate=lr,
    max_grad_norm=0.0 if args.case == "diverging" else args.max_grad_norm,
    eval_strategy="steps" if args.eval_steps else "no", eval_steps=args.eval_steps or None,
    logging_steps=1, report_to=args.report_to, save_strategy="no", use_cpu=True,
    disable_tqdm=True, dataloader_num_workers=0, seed=0,
)
trainer = Trainer(model=model, args=training_args, train_dataset=Data(256, 1), eval_dataset=Data(16, 2),
                  optimizers=optimizers, callbacks=callbacks)
trainer.train()
model_dir = os.environ.get("SM_MODEL_DIR")
if model_dir and trainer.is_world_process_zero():  # what the Trainer logged (once: every process has it)
    with open(os.path.join(model_dir, "log_history.json"), "w") as f:
        json.dump(trainer.state.log_history, f)
print("final", trainer.state.log_history[-1])
