"""Runtimes: where the training job and the rule evaluators run (`select_runtime` picks one)."""
from launcher.runtime._base import DataInput, ExitInfo, Handle, RuleLaunch, Runtime, TrainingLaunch
from launcher.runtime._process import ProcessHandle, ProcessRuntime, wait_all

__all__ = ["DataInput", "ExitInfo", "Handle", "ProcessHandle", "ProcessRuntime", "RuleLaunch", "Runtime", "TrainingLaunch", "wait_all"]
