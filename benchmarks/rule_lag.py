"""How long UnchangedTensor takes per step on a 1 M-parameter model saving every step, before
(smdebug's way: every tensor, num_steps values read a step) and after (issue 28: the trained state,
one read a tensor a step).

    python benchmarks/rule_lag.py [--steps 30] [--old-rule PATH/unchanged_tensor.py]

The trial: an MLP 512→1024→512→10 (1,055,242 parameters, as benchmarks/run.py), batch 64, trained
through our hook configured as `sdlocal run` configures a job with EVERY built-in rule (their default
collections merged, `save_interval=1`: weights, gradients, activations, inputs and outputs).
The figure: seconds of the rule per saved step (median), which is its lag growth per step when the
job saves every step: a rule keeps up when it is below the training's own step time.
`--old-rule`: a copy of the rule module before the change (`git show 2dedf34:evaluator/rules/unchanged_tensor.py`).
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def train(trial_dir: Path, steps: int) -> float:
    import torch
    from torch import nn

    from detection.hookconfig import hook_config, hook_request
    from sdlocal.hook.pytorch import Hook

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 10))
    hook = Hook(hook_config(trial_dir, hook_request(user_collections=())), out_dir=trial_dir)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for _ in range(steps):
        x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    return (time.perf_counter() - start) / steps


def per_step(rule_cls: type, trial_dir: Path) -> list[float]:
    from sdlocal.trial import create_trial

    trial = create_trial(str(trial_dir))
    rule = rule_cls(trial)
    out = []
    for step in trial.steps():
        t = time.perf_counter()
        rule.judge_step(step)
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--old-rule", type=Path, default=None)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from sdlocal.evaluator.rules import UnchangedTensor
    from sdlocal.trial import create_trial

    with tempfile.TemporaryDirectory(prefix="rule-lag-") as tmp:
        trial_dir = Path(tmp) / "trial"
        step_s = train(trial_dir, args.steps)
        trial = create_trial(str(trial_dir))
        names = trial.tensor_names(step=trial.steps()[-1])
        print(f"trial: {len(trial.steps())} steps, {len(names)} tensors a step; training {step_s * 1000:.1f} ms/step")
        rules = {"after (this checkout)": UnchangedTensor}
        if args.old_rule is not None:
            spec = importlib.util.spec_from_file_location("old_unchanged_tensor", args.old_rule)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            rules = {"before (smdebug's reading)": module.UnchangedTensor, **rules}
        medians = {}
        for label, cls in rules.items():
            times = per_step(cls, trial_dir)
            medians[label] = statistics.median(times)
            print(f"UnchangedTensor {label}: median {medians[label] * 1000:.1f} ms/step, "
                  f"max {max(times) * 1000:.1f} ms, total {sum(times):.2f} s for {len(times)} steps")
        if len(medians) == 2:
            before, after = medians.values()
            print(f"ratio before/after: {before / after:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
