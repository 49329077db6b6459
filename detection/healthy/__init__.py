"""Healthy training scripts of the common kinds (detection/healthy/*.py): plain PyTorch (and one
Hugging Face Trainer fine-tune), no debugger import, default initialisation, synthetic data,
seconds each on one CPU thread.
`sdlocal run --recommended-rules` must find no issue on any of them (tests/detection/test_healthy_recommended.py)."""
