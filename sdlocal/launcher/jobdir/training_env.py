"""What the SageMaker training toolkit tells a training script about its job: the `SM_*` variables,
`resourceconfig.json` and `inputdataconfig.json`, in the toolkit's shapes, for one host of a job
(`current_host` of `hosts`: algo-1 alone, or algo-1..algo-N for ResourceConfig.InstanceCount N).

The toolkit (sagemaker-training, `environment.Environment.to_env_vars()`) turns each property of
its environment into `SM_<NAME>`: strings as they are, anything else as compact sorted JSON;
`SM_TRAINING_ENV` is every property at once, `SM_HP_<NAME>` one per hyperparameter,
`SM_CHANNEL_<NAME>` one per channel. Hyperparameters are the request's strings, each JSON-decoded
when it parses (the SDK json-encodes framework hyperparameters); `sagemaker_*` ones are the
toolkit's own. Paths are under `opt_ml`: `/opt/ml` in a container, the job directory for the
process runtime.

Several hosts: every host has the same view but its own `current_host` (and `CURRENT_HOST`,
`is_master` for algo-1). With a distribution enabled (the SDK's `sagemaker_*_enabled` flags the
toolkit lists), the host group is a "distribution instance group": `distribution_instance_groups`
and `distribution_hosts` name it, the master is its first host.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sdlocal.launcher.spec.inputs import Channel
from sdlocal.launcher.spec.model import JobSpec

HOST = "algo-1"
GROUP = "homogeneousCluster"
NETWORK_INTERFACE = "eth0"
DEFAULT_LOG_LEVEL = 20  # logging.INFO
# hyperparameters the toolkit keeps to itself; other sagemaker_* ones are "framework params"
_TOOLKIT_HYPERPARAMETERS = frozenset({
    "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics", "sagemaker_region",
    "sagemaker_container_log_level", "sagemaker_job_name", "default_user_module_name", "_tuning_objective_metric",
    "sagemaker_s3_output",
})


# the flags the toolkit reads to put the host group in the distribution (environment.py)
_DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled", "sagemaker_parameter_server_enabled", "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled", "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled", "sagemaker_torch_distributed_enabled",
)


def decode_hyperparameter(value: str) -> Any:
    """The toolkit's reading of hyperparameters.json: JSON when it parses, else the text."""
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value


def _is_toolkit_key(key: str) -> bool:
    return key.startswith("sagemaker_") or key in _TOOLKIT_HYPERPARAMETERS


def _arg_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return "" if value is None else str(value)


def _env_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def count_gpus(timeout: float = 10.0) -> int:
    """GPUs as the toolkit counts them (`nvidia-smi --list-gpus`); 0 when there is none or no driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "--list-gpus"], capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


@dataclass(frozen=True)
class TrainingEnvironment:
    job_name: str
    entry_point: str  # relative to the code folder
    hyperparameters: tuple[tuple[str, str], ...] = ()  # the request's, as sent (sagemaker_* included)
    channels: tuple[Channel, ...] = ()
    instance_type: str = "local"
    hosts: tuple[str, ...] = (HOST,)
    current_host: str = HOST

    def for_host(self, host: str) -> TrainingEnvironment:
        return replace(self, current_host=host)

    def distribution_instance_groups(self) -> list[str]:
        """The toolkit's: the job's one group when a distribution flag is set, else none."""
        params = self.framework_parameters()
        return [GROUP] if any(params.get(flag, False) for flag in _DISTRIBUTION_FLAGS) else []

    @property
    def master_host(self) -> str:
        """The first host of the distribution (the toolkit's `master_hostname`)."""
        return self.hosts[0]

    def decoded_hyperparameters(self) -> dict[str, Any]:
        return {k: decode_hyperparameter(v) for k, v in self.hyperparameters}

    def user_hyperparameters(self) -> dict[str, Any]:
        return {k: v for k, v in self.decoded_hyperparameters().items() if not _is_toolkit_key(k)}

    def framework_parameters(self) -> dict[str, Any]:
        return {k: v for k, v in self.decoded_hyperparameters().items()
                if k.startswith("sagemaker_") and k not in _TOOLKIT_HYPERPARAMETERS}

    def user_args(self) -> list[str]:
        """The script's command-line arguments, as the toolkit builds them: sorted, `--name value`
        (`-n value` for one-letter names), maps as `k=v,k2=v2`."""
        args: list[str] = []
        for key, value in sorted(self.user_hyperparameters().items()):
            args += [f"--{key}" if len(key) > 1 else f"-{key}", _arg_value(value)]
        return args

    def resource_config(self) -> dict[str, Any]:
        """/opt/ml/input/config/resourceconfig.json of this host."""
        hosts = list(self.hosts)
        return {
            "current_host": self.current_host, "current_instance_type": self.instance_type,
            "current_group_name": GROUP, "hosts": hosts,
            "instance_groups": [{"instance_group_name": GROUP, "instance_type": self.instance_type, "hosts": hosts}],
            "network_interface_name": NETWORK_INTERFACE,
        }

    def input_data_config(self) -> dict[str, dict[str, str]]:
        """/opt/ml/input/config/inputdataconfig.json."""
        return {c.name: c.to_input_data_config() for c in self.channels}

    def properties(self, opt_ml: str, *, code_dir: str, num_gpus: int, num_cpus: int) -> dict[str, Any]:
        """The toolkit's `Environment` as a dict (SM_TRAINING_ENV) for this job at `opt_ml`."""
        hps = self.decoded_hyperparameters()
        entry = self.entry_point
        hosts = list(self.hosts)
        groups = self.distribution_instance_groups()
        return {
            "additional_framework_parameters": self.framework_parameters(),
            "channel_input_dirs": {c.name: f"{opt_ml}/input/data/{c.name}" for c in self.channels},
            "current_host": self.current_host,
            "current_instance_group": GROUP,
            "current_instance_group_hosts": hosts,
            "current_instance_type": self.instance_type,
            "distribution_hosts": hosts if groups else [],
            "distribution_instance_groups": groups,
            "framework_module": None,
            "hosts": hosts,
            "hyperparameters": self.user_hyperparameters(),
            "input_config_dir": f"{opt_ml}/input/config",
            "input_data_config": self.input_data_config(),
            "input_dir": f"{opt_ml}/input",
            "instance_groups": [GROUP],
            "instance_groups_dict": {GROUP: self.resource_config()["instance_groups"][0]},
            "is_hetero": False,
            "is_master": self.current_host == self.master_host,
            "is_modelparallel_enabled": None,
            "is_smddpmprun_installed": False,
            "is_smddprun_installed": False,
            "job_name": self.job_name,
            "log_level": hps.get("sagemaker_container_log_level", DEFAULT_LOG_LEVEL),
            "master_hostname": self.master_host,
            "model_dir": f"{opt_ml}/model",
            # the toolkit reports the SDK's sagemaker_submit_directory (an s3:// URI) when there is one
            "module_dir": str(hps.get("sagemaker_submit_directory", code_dir)),
            "module_name": entry[:-3] if entry.endswith(".py") else entry,
            "network_interface_name": NETWORK_INTERFACE,
            "num_cpus": num_cpus,
            "num_gpus": num_gpus,
            "num_neurons": 0,
            "output_data_dir": f"{opt_ml}/output/data",
            "output_dir": f"{opt_ml}/output",
            "output_intermediate_dir": f"{opt_ml}/output/intermediate",
            "resource_config": self.resource_config(),
            "topology": [],
            "user_entry_point": entry,
        }

    def to_env(self, opt_ml: str, *, code_dir: str, num_gpus: int, num_cpus: int | None = None) -> dict[str, str]:
        """The SM_* variables (plus CURRENT_HOST) the toolkit gives the script."""
        props = self.properties(opt_ml, code_dir=code_dir, num_gpus=num_gpus,
                                num_cpus=num_cpus if num_cpus is not None else os.cpu_count() or 1)
        values: dict[str, Any] = {
            "hosts": props["hosts"],
            "network_interface_name": props["network_interface_name"],
            "hps": props["hyperparameters"],
            "user_entry_point": props["user_entry_point"],
            "framework_params": props["additional_framework_parameters"],
            "resource_config": props["resource_config"],
            "input_data_config": props["input_data_config"],
            "channels": sorted(props["channel_input_dirs"]),
            "training_env": props,
            "user_args": self.user_args(),
        }
        for name in ("output_data_dir", "current_host", "current_instance_type", "current_instance_group",
                     "current_instance_group_hosts", "instance_groups", "instance_groups_dict",
                     "distribution_instance_groups", "is_hetero", "module_name", "log_level", "framework_module",
                     "input_dir", "input_config_dir", "output_dir", "num_cpus", "num_gpus", "num_neurons",
                     "model_dir", "module_dir", "output_intermediate_dir"):
            values[name] = props[name]
        for name, path in props["channel_input_dirs"].items():
            values[f"channel_{name}"] = path
        for name, value in props["hyperparameters"].items():
            values[f"hp_{name}"] = value
        env = {f"SM_{key.upper()}": _env_value(value) for key, value in values.items()}
        env["CURRENT_HOST"] = self.current_host
        return env


def training_environment(spec: JobSpec, host: str = HOST) -> TrainingEnvironment:
    """What the training toolkit tells the script of `spec`'s job on `host`."""
    return TrainingEnvironment(spec.job_name, spec.entry_point, tuple(spec.request_hyperparameters.items()),
                               spec.channels, spec.instance_type, hosts=spec.hosts, current_host=host)
