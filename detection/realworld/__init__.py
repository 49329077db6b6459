"""The real-world suite: silent training errors rebuilt from public bug reports (each case's
docstring cites its report), each a small CPU training run buggy and fixed, plus healthy
variants; judged by the rules beyond Debugger (evaluator/rules/: ReplicaDivergence and its
siblings). `python -m detection.realworld` writes docs/detection-realworld.md."""
