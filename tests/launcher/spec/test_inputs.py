"""The training inputs of a request: InputDataConfig channels, Environment, ResourceConfig, an s3://
SourceDir, with the service's constraints and one SpecError naming the field."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.overrides import Overrides
from sdlocal.launcher.spec.parse import spec_from_request


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("1,2\n")
    return tmp_path


def parse(src: Path, **fields: Any) -> JobSpec:
    return spec_from_request({"EntryPoint": "train.py", **fields}, base_dir=src, check_rule_names=False)


def s3_channel(name: str, uri: str, **extra: Any) -> dict[str, Any]:
    return {"ChannelName": name, "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}}, **extra}


def test_channels_s3_local_and_sdk_local_mode(src: Path) -> None:
    spec = parse(src, InputDataConfig=[
        s3_channel("training", "s3://b/data/", ContentType="text/csv"),
        s3_channel("local", "file://data"),  # sdlocal's extension: relative to the spec's folder
        {"ChannelName": "abs", "DataSource": {"FileDataSource": {"FileUri": f"file://{src}/data/train.csv"}}},
    ], AlgorithmSpecification={"TrainingInputMode": "File", "TrainingImage": "x"})
    assert [(c.name, c.source, c.is_s3) for c in spec.channels] == [
        ("training", "s3://b/data/", True), ("local", str(src / "data"), False),
        ("abs", str(src / "data" / "train.csv"), False)]
    assert training_environment(spec).input_data_config() == {
        "training": {"ContentType": "text/csv", "TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                     "RecordWrapperType": "None"},
        "local": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
        "abs": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}
    assert spec.input_uris() == ("s3://b/data/",)


@pytest.mark.parametrize(("channels", "field", "message"), [
    ([], "InputDataConfig", "has 0 channels; it takes 1 to 20"),
    ([s3_channel(f"c{i}", "s3://b/x") for i in range(21)], "InputDataConfig", "has 21 channels"),
    ([s3_channel("bad name", "s3://b/x")], "InputDataConfig[0].ChannelName",
     "'bad name' failed to satisfy constraint: Member must have length 1-64 and satisfy regular expression"),
    ([s3_channel("a", "s3://b/x"), s3_channel("a", "s3://b/y")], "InputDataConfig",
     "channel names must be unique; duplicated: a"),
    ([s3_channel("a", "http://b/x")], "InputDataConfig[0] (a).DataSource.S3DataSource.S3Uri",
     "'http://b/x' failed to satisfy constraint"),
    ([s3_channel("a", "file://nowhere")], "InputDataConfig[0] (a).DataSource.S3DataSource.S3Uri",
     "does not exist"),
    ([s3_channel("a", "s3://b/x", InputMode="Pipe")], "InputDataConfig[0] (a).InputMode",
     "Pipe mode is not supported by sdlocal"),
    ([s3_channel("a", "s3://b/x", InputMode="Stream")], "InputDataConfig[0] (a).InputMode",
     "Member must satisfy enum value set: [Pipe, File, FastFile]"),
    ([s3_channel("a", "s3://b/x", CompressionType="Gzip")], "InputDataConfig[0] (a).CompressionType",
     "Gzip applies to Pipe input mode only"),
    ([{"ChannelName": "a", "DataSource": {"S3DataSource": {"S3DataType": "ManifestFile", "S3Uri": "s3://b/m"}}}],
     "InputDataConfig[0] (a).DataSource.S3DataSource.S3DataType", "ManifestFile is not supported by sdlocal"),
    ([{"ChannelName": "a", "DataSource": {"FileSystemDataSource": {}}}], "InputDataConfig[0] (a).DataSource",
     "needs S3DataSource"),
])
def test_channel_validation(src: Path, channels: list[Any], field: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse(src, InputDataConfig=channels)
    assert err.value.field == field and message in err.value.message
    assert "\n" not in str(err.value)


def test_job_level_input_mode_applies_and_fastfile_runs_as_file(src: Path) -> None:
    with pytest.raises(SpecError, match="Pipe mode"):
        parse(src, InputDataConfig=[s3_channel("a", "s3://b/x")], AlgorithmSpecification={"TrainingInputMode": "Pipe"})
    spec = parse(src, InputDataConfig=[s3_channel("a", "s3://b/x", InputMode="FastFile")])
    assert spec.channels[0].input_mode == "FastFile"  # what inputdataconfig.json reports
    assert any("FastFile input mode runs as File" in w for w in spec.warnings)


def test_environment_validated_as_the_service_does(src: Path) -> None:
    spec = parse(src, Environment={"MY_FLAG": "1", "_x": 2, "LR": 0.5})
    assert dict(spec.environment) == {"MY_FLAG": "1", "_x": "2", "LR": "0.5"}
    cases = [({"1BAD": "x"}, "Environment", "key '1BAD' failed to satisfy constraint"),
             ({"A-B": "x"}, "Environment", "pattern: [a-zA-Z_][a-zA-Z0-9_]*"),
             ({"K": "v" * 513}, "Environment.K", "value has 513 characters; the maximum is 512"),
             ({f"K{i}": "v" for i in range(101)}, "Environment", "has 101 entries; the maximum is 100"),
             ({"K": ["a"]}, "Environment.K", "must be a string")]
    for env, field, message in cases:
        with pytest.raises(SpecError) as err:
            parse(src, Environment=env)
        assert err.value.field == field and message in err.value.message


def test_resource_config_and_output_data_config(src: Path) -> None:
    spec = parse(src, ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
                 OutputDataConfig={"S3OutputPath": "s3://models/out/", "KmsKeyId": "k"},
                 DebugHookConfig={"S3OutputPath": "s3://debug/x"}, TrainingJobName="j1")
    assert spec.instance_type == "ml.g5.xlarge"
    assert training_environment(spec).resource_config()["current_instance_type"] == "ml.g5.xlarge"
    assert spec.instance_count == 2 and spec.hosts == ("algo-1", "algo-2") and not spec.warnings
    assert training_environment(spec, "algo-2").resource_config()["current_host"] == "algo-2"
    assert "ResourceConfig.VolumeSizeInGB" in spec.ignored_fields and "OutputDataConfig.KmsKeyId" in spec.ignored_fields
    assert spec.model_artifacts == "s3://models/out/j1/output/model.tar.gz"  # SageMaker's layout
    assert spec.job_output == "s3://debug/x/j1"
    default = parse(src, TrainingJobName="j2")
    assert default.instance_type == "local"
    assert default.model_artifacts == f"{default.job_output}/output/model.tar.gz"
    with pytest.raises(SpecError, match="OutputDataConfig.S3OutputPath: must be an S3 URI"):
        parse(src, OutputDataConfig={"S3OutputPath": "/local"})


def test_s3_source_dir_from_sourcedir_or_the_sdk_hyperparameter(tmp_path: Path) -> None:
    uri = "s3://b/job/source/sourcedir.tar.gz"
    # the entry point is checked after the tarball is unpacked, not at parse time
    spec = spec_from_request({"EntryPoint": "train.py", "SourceDir": uri}, base_dir=tmp_path)
    assert spec.source_s3_uri == uri and spec.input_uris() == (uri,)
    spec = spec_from_request({"HyperParameters": {"sagemaker_program": '"train.py"',
                                                     "sagemaker_submit_directory": f'"{uri}"'}}, base_dir=tmp_path)
    assert spec.source_s3_uri == uri and spec.entry_point == "train.py"
    for bad, message in (("s3://b/prefix/", "names an S3 prefix"), ("s3://b", "names an S3 prefix"),
                         ("gs://b/x.tar.gz", "neither a local path nor an s3:// URI")):
        with pytest.raises(SpecError) as err:
            spec_from_request({"EntryPoint": "train.py", "SourceDir": bad}, base_dir=tmp_path)
        assert err.value.field == "SourceDir" and message in err.value.message
    with pytest.raises(SpecError) as err:
        spec_from_request({"EntryPoint": "t.py", "HyperParameters": {"sagemaker_submit_directory": '"s3://b/"'}},
                             base_dir=tmp_path)
    assert err.value.field == "HyperParameters.sagemaker_submit_directory"


def test_channel_flag_adds_or_replaces_channels(src: Path) -> None:
    request = {"InputDataConfig": [s3_channel("training", "s3://b/old"), s3_channel("test", "s3://b/test")]}
    req = Overrides(channels=(("training", str(src / "data")), ("extra", "s3://b/extra"))).apply(request)
    spec = parse(src, InputDataConfig=req["InputDataConfig"])
    assert [(c.name, c.source) for c in spec.channels] == [
        ("test", "s3://b/test"), ("training", str(src / "data")), ("extra", "s3://b/extra")]
    req = Overrides(s3_output_path="s3://elsewhere/p").apply({"OutputDataConfig": {"S3OutputPath": "s3://b/"}})
    assert req["OutputDataConfig"]["S3OutputPath"] == "s3://elsewhere/p"
