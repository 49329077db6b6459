"""GPU figures through NVML (the `pynvml` module of the `nvidia-ml-py` package), imported lazily.

Per GPU, as SageMaker writes them: `GPUUtilization` (NVML's utilization rate: the share of the
last sample period in which a kernel ran) and `GPUMemoryUtilization` (memory used / total, %).
No module, no driver, or no GPU: `open_gpu_collector` returns None and a reason; never an error.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from sdlocal.trial.profiler import Sample
from sdlocal.trial.profiler.names import GPU_MEMORY_UTILIZATION, GPU_TYPE, GPU_UTILIZATION

log = logging.getLogger(__name__)


class GpuCollector:
    def __init__(self, nvml: Any, handles: Sequence[tuple[int, Any]]) -> None:
        self._nvml = nvml
        self._handles = list(handles)
        self._failed: set[int] = set()

    @property
    def gpus(self) -> list[int]:
        return [i for i, _ in self._handles]

    def sample(self) -> list[Sample]:
        out: list[Sample] = []
        for index, handle in self._handles:
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle)
                mem = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as e:  # noqa: BLE001 - a GPU that fell off the bus: skip it, say it once
                if index not in self._failed:
                    self._failed.add(index)
                    log.warning("GPU %d: NVML stopped answering (%s); its samples are skipped", index, e)
                continue
            name = f"gpu{index}"
            out.append(Sample(GPU_TYPE, name, GPU_UTILIZATION, float(util.gpu)))
            used = 100.0 * float(mem.used) / float(mem.total) if mem.total else 0.0
            out.append(Sample(GPU_TYPE, name, GPU_MEMORY_UTILIZATION, used))
        return out

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library that may be half gone
            pass


def open_gpu_collector(
    indices: Sequence[int] | None = None, nvml: ModuleType | Any | None = None
) -> tuple[GpuCollector | None, str]:
    """(collector, "") when NVML answers and sees GPUs, else (None, why). `indices` restricts the
    GPUs (those given to a container); `nvml` replaces the pynvml module (tests)."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None, "the nvidia-ml-py package (pynvml) is not installed"
    try:
        nvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None, f"NVML did not start ({e})"
    try:
        count = int(nvml.nvmlDeviceGetCount())
        wanted = range(count) if indices is None else [i for i in indices if 0 <= i < count]
        handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in wanted]
    except Exception as e:  # noqa: BLE001
        _shutdown(nvml)
        return None, f"NVML could not list the GPUs ({e})"
    if not handles:
        _shutdown(nvml)
        return None, "NVML sees no GPU"
    return GpuCollector(nvml, handles), ""


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass
