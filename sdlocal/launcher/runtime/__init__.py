"""Runtimes: where the training job and the rule evaluators run (`select_runtime` picks one)."""
from sdlocal.launcher.runtime.base import DataInput, ExitInfo, Handle, RuleLaunch, Runtime, TrainingLaunch
from sdlocal.launcher.runtime.process import ProcessHandle, ProcessRuntime, wait_all

__all__ = ["DataInput", "ExitInfo", "Handle", "ProcessHandle", "ProcessRuntime", "RuleLaunch", "Runtime", "TrainingLaunch", "wait_all"]
