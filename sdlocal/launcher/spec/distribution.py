"""How a job's training processes are launched on its hosts: the SageMaker Python SDK's
`distribution=` as it reaches CreateTrainingJob (HyperParameters the SDK adds), read at the spec
boundary with one SpecError naming the hyperparameter that sdlocal cannot honour.

What the SDK v2 sends (`sagemaker/pytorch/estimator.py`, `EstimatorBase._distribution_configuration`)
and what the PyTorch training toolkit launches for it (`sagemaker_pytorch_container/training.py`,
`sagemaker_training/runner.py`):

    {"torch_distributed": {"enabled": True}}   sagemaker_torch_distributed_enabled      torchrun on every host
    {"pytorchddp": {"enabled": True}}           sagemaker_distributed_dataparallel_enabled  mpirun + smddprun (SageMaker)
    {"smdistributed": {"dataparallel": ...}}    (the SDK turns pytorchddp into this)       on every host: see below
    {"mpi": {"enabled": True, ...}}             sagemaker_mpi_enabled,                    mpirun on algo-1 across
                                                sagemaker_mpi_num_of_processes_per_host,  every host
                                                sagemaker_mpi_custom_mpi_options
    (none)                                                                                 one process per host

Processes per host (the toolkit's `processes_per_host`, every runner): the hyperparameter
`sagemaker_mpi_num_of_processes_per_host` when set (the toolkit reads it for torchrun too), else
this host's GPUs, else 1. On a CPU host that is how to ask for several processes per host.

`pytorchddp` / SMDDP: SageMaker runs the script with mpirun and smddprun, which set the variables
a native PyTorch DDP script reads (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
smddprun and the `smddp` backend are SageMaker's own (not on any registry): sdlocal starts the same
ranks with torch's launcher (torchrun), which sets the same variables; a script that imports
`smdistributed` fails with its ImportError.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdlocal.launcher.errors import SpecError

NONE = "none"
TORCH_DISTRIBUTED = "torch_distributed"
PYTORCH_DDP = "pytorchddp"
MPI = "mpi"

TORCH_DISTRIBUTED_KEY = "sagemaker_torch_distributed_enabled"
PYTORCH_DDP_KEY = "sagemaker_pytorch_ddp_enabled"
SMDDP_KEY = "sagemaker_distributed_dataparallel_enabled"
MPI_KEY = "sagemaker_mpi_enabled"
PROCESSES_PER_HOST_KEY = "sagemaker_mpi_num_of_processes_per_host"
NUM_PROCESSES_KEY = "sagemaker_mpi_num_processes"
MPI_OPTIONS_KEY = "sagemaker_mpi_custom_mpi_options"
SMDDP_OPTIONS_KEY = "sagemaker_distributed_dataparallel_custom_mpi_options"
INSTANCE_GROUPS_KEY = "sagemaker_distribution_instance_groups"

# distribution settings of the SDK that sdlocal does not run, and why (one line each)
_REFUSED = {
    "sagemaker_parameter_server_enabled": "the parameter_server distribution is TensorFlow's; sdlocal runs PyTorch's "
                                          "torch_distributed, pytorchddp and mpi",
    "sagemaker_multi_worker_mirrored_strategy_enabled": "the multi_worker_mirrored_strategy distribution is "
                                                        "TensorFlow's; sdlocal runs PyTorch's torch_distributed, "
                                                        "pytorchddp and mpi",
    "sagemaker_pytorch_xla_multi_worker_enabled": "the pytorchxla distribution needs SageMaker Training Compiler "
                                                  "(GPU instances); sdlocal does not run it",
    "mp_parameters": "smdistributed modelparallel (SageMaker's model parallelism library) is not available off "
                     "SageMaker; sdlocal does not run it",
    INSTANCE_GROUPS_KEY: "distribution over instance groups (heterogeneous clusters) is not supported by sdlocal: "
                         "use ResourceConfig.InstanceCount",
}


def _decoded(value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def _enabled(value: str | None) -> bool:
    """The toolkit's truth of a flag: the JSON-decoded value (the SDK sends `true`/`false`)."""
    if value is None:
        return False
    decoded = _decoded(value)
    if isinstance(decoded, str):
        return decoded.strip().lower() in ("true", "1", "yes")
    return bool(decoded)


def _positive_int(raw: Mapping[str, str], key: str) -> int | None:
    if key not in raw:
        return None
    value = _decoded(raw[key])
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"HyperParameters.{key}", f"must be a whole number >= 1, got {raw[key]!r}")
    return value


def _options(raw: Mapping[str, str], key: str) -> str:
    value = _decoded(raw.get(key, ""))
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Distribution:
    """The launch of one job: `kind` (none, torch_distributed, pytorchddp, mpi) and the processes
    per host asked for (None: the host's GPUs, else 1, as the toolkit decides)."""

    kind: str = NONE
    processes_per_host: int | None = None
    num_processes: int | None = None  # mpi: `-np` (default processes_per_host x hosts)
    mpi_options: str = ""  # mpi: the SDK's custom_mpi_options, split as a shell would

    @property
    def enabled(self) -> bool:
        return self.kind != NONE

    @property
    def uses_torchrun(self) -> bool:
        return self.kind in (TORCH_DISTRIBUTED, PYTORCH_DDP)

    def processes_on(self, num_gpus: int) -> int:
        """The toolkit's processes per host: the hyperparameter, else the GPUs, else 1."""
        if self.processes_per_host is not None:
            return self.processes_per_host
        return num_gpus if num_gpus > 0 else 1

    def describe(self, hosts: int, num_gpus: int) -> str:
        per_host = self.processes_on(num_gpus)
        return f"{self.kind}: {hosts} host(s) x {per_host} process(es) = {hosts * per_host} rank(s)"


def parse_distribution(raw_hyperparameters: Mapping[str, str]) -> Distribution:
    """The distribution the request's hyperparameters ask for (the toolkit's precedence: mpi,
    pytorchddp, torch_distributed, smdistributed dataparallel); SpecError for one sdlocal does not run."""
    for key, why in _REFUSED.items():
        if key in raw_hyperparameters and (key in ("mp_parameters", INSTANCE_GROUPS_KEY)
                                           and _decoded(raw_hyperparameters[key]) not in ({}, [], "", None)
                                           or _enabled(raw_hyperparameters[key])):
            raise SpecError(f"HyperParameters.{key}", why)
    per_host = _positive_int(raw_hyperparameters, PROCESSES_PER_HOST_KEY)
    if _enabled(raw_hyperparameters.get(MPI_KEY)):
        return Distribution(MPI, per_host, _positive_int(raw_hyperparameters, NUM_PROCESSES_KEY),
                            _options(raw_hyperparameters, MPI_OPTIONS_KEY))
    if _enabled(raw_hyperparameters.get(PYTORCH_DDP_KEY)) or _enabled(raw_hyperparameters.get(SMDDP_KEY)):
        return Distribution(PYTORCH_DDP, per_host)
    if _enabled(raw_hyperparameters.get(TORCH_DISTRIBUTED_KEY)):
        return Distribution(TORCH_DISTRIBUTED, per_host)
    return Distribution(NONE, per_host)
