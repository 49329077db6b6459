"""What runs when the request names no script (launcher/spec/algorithm.py): SageMaker's XGBoost
algorithm from its image URI (checked at CreateTrainingJob as its container checks it), another
built-in algorithm refused by name, a ContainerEntrypoint command, MetricDefinitions; the metrics
read from log lines (launcher/job/metrics.py); a container command's /opt/ml under the process
runtime (launcher/runtime/opt_ml.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.job.metrics import MetricScanner, final_metrics
from sdlocal.launcher.runtime.opt_ml import localize_channels, map_opt_ml
from sdlocal.launcher.spec.algorithm import BuiltinAlgorithm, ContainerCommand, MetricDefinition
from sdlocal.launcher.spec.parse import spec_from_request

IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"


def _request(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    (tmp_path / "train").mkdir(exist_ok=True)
    req: dict[str, Any] = {
        "TrainingJobName": "algo",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {"num_round": "10", "max_depth": "3"},
        "InputDataConfig": [{"ChannelName": "train", "ContentType": "text/csv",
                             "DataSource": {"S3DataSource": {"S3Uri": "s3://b/train/"}}}],
    }
    req.update(extra)
    return req


def _error(tmp_path: Path, **extra: Any) -> SpecError:
    with pytest.raises(SpecError) as e:
        spec_from_request(_request(tmp_path, **extra), base_dir=tmp_path)
    return e.value


def test_xgboost_image_without_script_runs_the_algorithm(tmp_path: Path) -> None:
    spec = spec_from_request(_request(tmp_path), base_dir=tmp_path)
    assert spec.algorithm == BuiltinAlgorithm("xgboost", "1.7-1") and not spec.script_mode
    assert spec.algorithm.argv("py") == ["py", "-m", "sdlocal.hook.algorithms.xgboost", "--version", "1.7-1"]
    assert spec.code_in_job_folder and spec.entry_point == ""
    names = [d.name for d in spec.metric_definitions]
    assert "train:rmse" in names and "validation:rmse" in names
    # other regions and versions; the legacy tag spelling
    for image in ("246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:0.90-2-cpu-py3",
                  "141502667606.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-xgboost:1.3-1"):
        algo = {"TrainingImage": image}
        assert spec_from_request(_request(tmp_path, AlgorithmSpecification=algo), base_dir=tmp_path).algorithm


def test_with_a_script_it_is_script_mode(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = spec_from_request(_request(tmp_path, EntryPoint="train.py", SourceDir=str(tmp_path)),
                                base_dir=tmp_path)
    assert spec.script_mode and spec.algorithm is None and spec.metric_definitions == ()


@pytest.mark.parametrize(("extra", "field", "words"), [
    ({"HyperParameters": {"max_depth": "3"}}, "HyperParameters.num_round", "num_round"),
    ({"HyperParameters": {"num_round": "10", "eta": "2"}}, "HyperParameters.eta", "eta"),
    ({"InputDataConfig": [{"ChannelName": "train", "ContentType": "application/x-recordio-protobuf",
                           "DataSource": {"S3DataSource": {"S3Uri": "s3://b/t/"}}}]},
     "InputDataConfig.train.ContentType", "recordio"),
    ({"InputDataConfig": [{"ChannelName": "train", "ContentType": "image/jpeg",
                           "DataSource": {"S3DataSource": {"S3Uri": "s3://b/t/"}}}]},
     "InputDataConfig.train.ContentType", "image/jpeg"),
    ({"InputDataConfig": [{"ChannelName": "validation", "ContentType": "text/csv",
                           "DataSource": {"S3DataSource": {"S3Uri": "s3://b/t/"}}}]},
     "InputDataConfig.train", "train"),
    ({"AlgorithmSpecification": {"TrainingImage": "382416733822.dkr.ecr.us-east-1.amazonaws.com/linear-learner:1"}},
     "AlgorithmSpecification.TrainingImage", "linear-learner"),
    ({"AlgorithmSpecification": {"TrainingImage": IMAGE.replace("1.7-1", "3.0-5")}},
     "AlgorithmSpecification.TrainingImage", "3.0-5"),
    ({"AlgorithmSpecification": {"TrainingImage": "my-own-image:1"}}, "EntryPoint", "required"),
])
def test_refused_at_create_training_job(tmp_path: Path, extra: dict[str, Any], field: str, words: str) -> None:
    error = _error(tmp_path, **extra)
    assert error.field == field and words in str(error), str(error)


def test_container_command(tmp_path: Path) -> None:
    algo = {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311",
            "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": ["-c", "echo hi"],
            "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]}
    spec = spec_from_request(_request(tmp_path, AlgorithmSpecification=algo, HyperParameters={}),
                                base_dir=tmp_path)
    assert spec.command == ContainerCommand(("/bin/bash",), ("-c", "echo hi")) and spec.algorithm is None
    assert spec.metric_definitions == (MetricDefinition("loss", "loss=([0-9.]+)"),)
    assert not spec.ignored_fields
    for bad, field in (({"ContainerArguments": ["x"]}, "AlgorithmSpecification.ContainerArguments"),
                       ({"ContainerEntrypoint": []}, "AlgorithmSpecification.ContainerEntrypoint"),
                       ({"ContainerEntrypoint": ["x" * 300]}, "AlgorithmSpecification.ContainerEntrypoint[0]"),
                       ({"ContainerEntrypoint": ["sh"], "MetricDefinitions": [{"Name": "a", "Regex": "(["}]},
                        "AlgorithmSpecification.MetricDefinitions[0].Regex"),
                       ({"ContainerEntrypoint": ["sh"], "MetricDefinitions": [{"Name": "a", "Regex": "no group"}]},
                        "AlgorithmSpecification.MetricDefinitions[0].Regex")):
        assert _error(tmp_path, AlgorithmSpecification={"TrainingImage": "img", **bad}).field == field


def test_metric_lines_and_final_values() -> None:
    definitions = (MetricDefinition("train:rmse", r".*\[[0-9]+\].*#011train-rmse:([-+]?[0-9]*\.?[0-9]+)"),
                   MetricDefinition("validation:rmse", r".*\[[0-9]+\].*#011validation-rmse:([-+]?[0-9]*\.?[0-9]+)"),
                   MetricDefinition("never", r"never=(\S+)"))
    scanner = MetricScanner(definitions)
    values = scanner.scan("[0]#011train-rmse:4.5#011validation-rmse:5.25", 10.0)
    values += scanner.scan("[1]#011train-rmse:3.5#011validation-rmse:4.75", 11.0)
    values += scanner.scan("never=nan, not a number", 12.0) + scanner.scan("unrelated line", 13.0)
    assert [(v.name, v.value) for v in values] == [("train:rmse", 4.5), ("validation:rmse", 5.25),
                                                   ("train:rmse", 3.5), ("validation:rmse", 4.75)]
    assert final_metrics(definitions, values) == [
        {"MetricName": "train:rmse", "Value": 3.5, "Timestamp": 11.0},
        {"MetricName": "validation:rmse", "Value": 4.75, "Timestamp": 11.0}]


def test_container_paths_move_into_the_job_folder(tmp_path: Path) -> None:
    root = tmp_path / "job"
    assert map_opt_ml("cd /opt/ml/input/data/code && ls /opt/ml /opt/mlflow", root) == \
        f"cd {root}/input/data/code && ls {root} /opt/mlflow"
    drivers = root / "input" / "data" / "sm_drivers"
    drivers.mkdir(parents=True)
    (drivers / "sm_train.sh").write_text("cd /opt/ml/input/data/code\npython train.py\n")
    (drivers / "sm_train.sh").chmod(0o755)
    (drivers / "blob.bin").write_bytes(b"\xff\xfe/opt/ml")
    user_code = tmp_path / "user-code"  # a local channel: linked into the job, never changed in place
    user_code.mkdir()
    (user_code / "train.py").write_text("open('/opt/ml/model/m.txt', 'w')\n")
    (root / "input" / "data" / "code").symlink_to(user_code, target_is_directory=True)
    data = root / "input" / "data" / "train"
    data.mkdir()
    (data / "rows.csv").write_text("/opt/ml is data here\n")
    done = localize_channels(root, ["/bin/bash", "-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"])
    assert done == ["sm_drivers", "code"]
    assert (drivers / "sm_train.sh").read_text() == f"cd {root}/input/data/code\npython train.py\n"
    assert os.access(drivers / "sm_train.sh", os.X_OK)
    assert (drivers / "blob.bin").read_bytes() == b"\xff\xfe/opt/ml"
    code = root / "input" / "data" / "code"
    assert not code.is_symlink() and (code / "train.py").read_text() == f"open('{root}/model/m.txt', 'w')\n"
    assert (user_code / "train.py").read_text() == "open('/opt/ml/model/m.txt', 'w')\n"
    assert (data / "rows.csv").read_text() == "/opt/ml is data here\n"  # not named by the command
