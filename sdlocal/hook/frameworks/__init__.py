"""The zero-code hook inside the training loops of frameworks (unchanged scripts):

- `hf`: Hugging Face's `Trainer` gets a `TrainerCallback` (patched in when
  `transformers.trainer_callback` is imported: hook/_on_import.py): TRAIN steps are its optimizer steps, gradients
  are saved right before the optimizer step (accumulated, unscaled, clipped).
- `lightning`: Lightning's `Trainer` loads a `Callback` through its
  `lightning.pytorch.callbacks_factory` entry point (pyproject.toml): TRAIN steps are its
  optimizer steps, EVAL steps its validation batches, gradients right before the optimizer step.

Both go through the process's zero-code attacher (hook._autoattach `active()`, `adopt`), so a
script's own smdebug hook still is the job's only hook (no double saving).
"""
