"""Before and after training, against a real moto server: channels downloaded or linked, the SDK's
sourcedir.tar.gz fetched and unpacked (hostile archives refused), model/output tarballs, FailureReason."""
from __future__ import annotations

import gzip
import io
import os
import posixpath
import re
import stat
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import JobError
from sdlocal.launcher.job.artifacts import failure_reason, publish_folder
from sdlocal.launcher.job.staging import bucket_storage, fetch_source, stage_channels
from sdlocal.launcher.runtime import DataInput
from sdlocal.launcher.spec.inputs import Channel
from sdlocal.trial.storage import LocalStorage, S3Storage


def put(client: Any, bucket: str, key: str, body: bytes = b"x") -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def tarball(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def file_member(name: str, data: bytes = b"print('hi')\n") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def link_member(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def test_s3_channels_downloaded_with_the_sdks_prefix_semantics(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    for key in ("data/train/a.csv", "data/train/sub/b.csv", "data/train/", "data/train-extra.csv", "other/c.csv"):
        put(s3_client, bucket, key, key.encode())
    channels = (Channel("folder", f"s3://{bucket}/data/train/"),  # a "folder": keys under it
                Channel("prefix", f"s3://{bucket}/data/train"),  # a key prefix: train-extra.csv matches too
                Channel("one", f"s3://{bucket}/other/c.csv"))  # one object: the file itself
    lines: list[str] = []
    inputs = stage_channels(bucket_storage(s3_client), channels, tmp_path / "input" / "data", echo=lines.append)
    data = tmp_path / "input" / "data"
    files = {c: sorted(p.relative_to(data / c).as_posix() for p in (data / c).rglob("*") if p.is_file())
             for c in ("folder", "prefix", "one")}
    assert files == {"folder": ["a.csv", "sub/b.csv"], "prefix": ["-extra.csv", "a.csv", "sub/b.csv"],
                     "one": ["c.csv"]}
    assert (data / "folder" / "sub" / "b.csv").read_bytes() == b"data/train/sub/b.csv"
    assert inputs[0] == DataInput("input/data/folder", data / "folder")
    assert f"Channel folder: 2 file(s) from s3://{bucket}/data/train/" in lines


def test_s3_channel_errors_name_the_channel(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    with pytest.raises(JobError, match=rf"channel training: no S3 objects found under S3 URL s3://{bucket}/none/"):
        stage_channels(bucket_storage(s3_client), (Channel("training", f"s3://{bucket}/none/"),), tmp_path)
    with pytest.raises(JobError, match=r"channel t: cannot download s3://no-such-bucket-x/d: .*NoSuchBucket"):
        stage_channels(bucket_storage(s3_client), (Channel("t", "s3://no-such-bucket-x/d"),), tmp_path)


def test_s3_key_climbing_out_of_the_channel_is_refused(tmp_path: Path) -> None:
    class Listing(LocalStorage):  # S3 allows any key; moto's URL handling would normalize this one away
        def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
            return ["d/ok.csv", "d/../../escape.csv"]

        def read_to_file(self, key: str, path: str | Path) -> None:
            Path(path).write_text(key)

    with pytest.raises(JobError, match=r"channel t: S3 key 'd/../../escape.csv' would be written outside"):
        stage_channels(lambda _bucket: Listing(tmp_path / "unused"), (Channel("t", "s3://b/d/"),), tmp_path / "data")
    assert not (tmp_path / "escape.csv").exists()


def test_local_channels_are_linked_not_copied(tmp_path: Path) -> None:
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "x.npy").write_bytes(b"x")
    single = tmp_path / "labels.csv"
    single.write_text("1\n")
    data = tmp_path / "job" / "input" / "data"
    inputs = stage_channels(None, (Channel("train", str(folder)), Channel("labels", str(single))), data)
    assert (data / "train").is_symlink() and (data / "train" / "x.npy").read_bytes() == b"x"
    assert (data / "labels" / "labels.csv").read_text() == "1\n"
    assert inputs == (DataInput("input/data/train", folder), DataInput("input/data/labels/labels.csv", single))


def test_fetch_source_unpacks_the_sdks_tarball(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    put(s3_client, bucket, "job/source/sourcedir.tar.gz", tarball([
        file_member("train.py"), file_member("lib/util.py", b"X = 1\n"), link_member("lib/alias.py", "util.py")]))
    dest = tmp_path / "job" / "code"
    fetch_source(bucket_storage(s3_client), f"s3://{bucket}/job/source/sourcedir.tar.gz", dest)
    assert (dest / "train.py").read_text() == "print('hi')\n"
    assert (dest / "lib" / "alias.py").read_text() == "X = 1\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["code"]  # the download is not left behind


@pytest.mark.parametrize(("members", "message"), [
    ([file_member("../evil.py")], "member '../evil.py' would be extracted outside the code folder; refused"),
    ([file_member("a/../../evil.py")], "member 'a/../../evil.py' would be extracted outside"),
    ([file_member("/tmp/evil.py")], "member '/tmp/evil.py' would be extracted outside"),
    ([link_member("lib", "../../..")], "link 'lib' -> '../../..' points outside the code folder; refused"),
    ([link_member("passwd", "/etc/passwd")], "link 'passwd' -> '/etc/passwd' points outside"),
    ([link_member("h", "../x", tarfile.LNKTYPE)], "link 'h' -> '../x' points outside"),
    ([link_member("dev", "", tarfile.CHRTYPE)], "member 'dev' is a device or FIFO; refused"),
])
def test_fetch_source_refuses_members_escaping_the_folder(tmp_path: Path, s3_client: Any, bucket: str,
                                                          members: list[Any], message: str) -> None:
    put(s3_client, bucket, "evil.tar.gz", tarball([file_member("train.py"), *members]))
    dest = tmp_path / "job" / "code"
    with pytest.raises(JobError) as err:
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/evil.tar.gz", dest)
    assert str(err.value).startswith(f"SourceDir s3://{bucket}/evil.tar.gz: {message}")
    assert str(err.value).endswith("; refused")
    assert not (dest / "train.py").exists()  # checked before anything is written
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "job" / "evil.py").exists()


def test_fetch_source_missing_or_bad_archive_is_one_line(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/nothing/sourcedir.tar.gz"
    with pytest.raises(JobError) as err:
        fetch_source(bucket_storage(s3_client), uri, tmp_path / "code")
    assert str(err.value) == f"SourceDir {uri}: no such object in S3"
    with pytest.raises(JobError, match=r"SourceDir s3://no-such-bucket-y/s.tar.gz: no such object in S3"):
        fetch_source(bucket_storage(s3_client), "s3://no-such-bucket-y/s.tar.gz", tmp_path / "code")
    put(s3_client, bucket, "plain.py", b"print('not a tarball')\n")
    with pytest.raises(JobError) as err:
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/plain.py", tmp_path / "code")
    assert str(err.value).startswith(f"SourceDir s3://{bucket}/plain.py: not a readable gzipped tar archive")
    put(s3_client, bucket, "cut.tar.gz", tarball([file_member("train.py", os.urandom(100_000))])[:5000])
    with pytest.raises(JobError, match="not a readable gzipped tar archive"):
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/cut.tar.gz", tmp_path / "code2")


def test_publish_folder_tars_contents_at_the_root(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "model.pth").write_bytes(b"weights")
    (model / "sub" / "vocab.txt").write_text("a\n")
    publish_folder(model, S3Storage(bucket, "out/j/output", client=s3_client), "model.tar.gz", tmp_path)
    body = s3_client.get_object(Bucket=bucket, Key="out/j/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["model.pth", "sub", "sub/vocab.txt"]
        assert tar.extractfile("model.pth").read() == b"weights"  # type: ignore[union-attr]
    publish_folder(tmp_path / "missing", S3Storage(bucket, "out/j/output", client=s3_client), "output.tar.gz",
                   tmp_path)
    body = s3_client.get_object(Bucket=bucket, Key="out/j/output/output.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        assert tar.getnames() == []  # SageMaker uploads an empty archive too
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".publish-")]


def test_failure_reason_the_toolkits_way(tmp_path: Path) -> None:
    failure = tmp_path / "output" / "failure"
    log = ["epoch 1", "Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
           "ValueError: the learning rate must be positive", "exit"]
    reason = failure_reason(failure, 1, "train.py", ["--lr", "-1"], log)
    assert reason == ('AlgorithmError: ExecuteUserScriptError:\nExitCode 1\n'
                      'ErrorMessage "ValueError: the learning rate must be positive"\nCommand "python train.py --lr -1"')
    assert failure.read_text() == reason[len("AlgorithmError: "):]  # written as the toolkit writes it
    failure.write_text("my own reason: " + "x" * 2000)  # the script's own failure file wins, capped at 1024
    reason = failure_reason(failure, 1, "train.py", [], log)
    assert reason.startswith("AlgorithmError: my own reason: xxx") and len(reason) == 1024


def cve_2025_4517_archive(up: int = 4) -> bytes:
    """An archive of the public CVE-2025-4517 exploit's shape: symlinks to 247-character folder
    names nested until the path is past PATH_MAX (where `os.path.realpath`, which tarfile's `data`
    filter relies on before 3.11.13, stops resolving), a link out through `..`s from there, and a
    file written through it: `up` levels above the folder it is unpacked into."""
    comp, steps = "d" * 247, "abcdefghijklmnop"
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    path = ""
    for step in steps:
        folder = tarfile.TarInfo(posixpath.join(path, comp))
        folder.type = tarfile.DIRTYPE
        members += [(folder, None), link_member(posixpath.join(path, step), comp)]
        path = posixpath.join(path, comp)
    deep = posixpath.join(*steps, "l" * 254)
    members += [link_member(deep, "../" * len(steps)), link_member("escape", deep + "/" + "../" * up),
                file_member("escape/pwned.txt", b"escaped\n")]
    return tarball(members)


def test_the_cve_2025_4517_archive_is_refused_whatever_the_python(tmp_path: Path, s3_client: Any,
                                                                  bucket: str) -> None:
    archive = cve_2025_4517_archive()
    # the archive is the real thing: where this interpreter's own `data` filter is fooled, it escapes
    stock = tmp_path / "stock" / "c" / "jobs" / "job" / "code"
    stock.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        try:
            tar.extractall(stock, filter="data")
            stock_escaped = (tmp_path / "stock" / "pwned.txt").exists()  # 4 levels above code
        except tarfile.TarError:
            stock_escaped = False
    if sys.version_info[:3] < (3, 11, 13) and sys.version_info[:2] == (3, 11):
        assert stock_escaped, "the exploit's shape no longer escapes tarfile's filter on a vulnerable Python"
    (tmp_path / "stock" / "pwned.txt").unlink(missing_ok=True)

    put(s3_client, bucket, "cve/sourcedir.tar.gz", archive)
    dest = tmp_path / "ours" / "c" / "jobs" / "job" / "code"
    with pytest.raises(JobError) as err:
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/cve/sourcedir.tar.gz", dest)
    assert "would be written through the link 'a'; refused" in str(err.value)
    assert "\n" not in str(err.value)
    assert not list(tmp_path.rglob("pwned.txt"))


@pytest.mark.parametrize(("members", "message"), [
    # a link to a link that points out, each harmless alone
    ([link_member("a", "b"), link_member("b", "../..")], "link 'a' -> 'b' points outside the code folder"),
    ([link_member("loop", "loop")], "link 'loop' -> 'loop' points outside"),
    # writing below an archive's own symlink, even one pointing inside
    ([link_member("lib", "src"), file_member("lib/x.py")], "member 'lib/x.py' would be written through the link 'lib'"),
    # a hard link must name a regular file of the archive
    ([link_member("h", "etc/passwd", tarfile.LNKTYPE)], "link 'h' -> 'etc/passwd' points outside"),
    ([link_member("s", "train.py"), link_member("h", "s", tarfile.LNKTYPE)], "link 'h' -> 's' points outside"),
])
def test_links_are_resolved_through_the_archives_own_links(tmp_path: Path, s3_client: Any, bucket: str,
                                                           members: list[Any], message: str) -> None:
    put(s3_client, bucket, "links.tar.gz", tarball([file_member("train.py"), *members]))
    with pytest.raises(JobError, match=re.escape(message)):
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/links.tar.gz", tmp_path / "code")
    assert not (tmp_path / "code" / "train.py").exists()


def test_hard_links_and_modes_unpack_without_setuid(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    run, setuid = file_member("run.sh", b"#!/bin/sh\n"), file_member("su.sh", b"#!/bin/sh\n")
    run[0].mode, setuid[0].mode = 0o775, 0o4777
    put(s3_client, bucket, "modes.tar.gz", tarball([file_member("train.py"), run, setuid,
                                                     link_member("copy.py", "train.py", tarfile.LNKTYPE)]))
    dest = tmp_path / "code"
    fetch_source(bucket_storage(s3_client), f"s3://{bucket}/modes.tar.gz", dest)
    assert (dest / "copy.py").read_text() == "print('hi')\n"
    assert stat.S_IMODE((dest / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "su.sh").stat().st_mode) == 0o755  # no setuid, no group/other write


def _declared_only(name: str, size: int) -> bytes:
    """A gzipped tar whose one member's header declares `size` bytes (data cut short): a bomb's
    header, read without unpacking anything."""
    info = tarfile.TarInfo(name)
    info.size = size
    return gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT))


def test_archive_limits_name_the_setting(tmp_path: Path, s3_client: Any, bucket: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 GiB declared by one member's header: over the default 1 GiB before any byte is unpacked
    put(s3_client, bucket, "bomb.tar.gz", _declared_only("zeros.bin", 2 << 30))
    with pytest.raises(JobError) as err:
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/bomb.tar.gz", tmp_path / "code")
    assert str(err.value) == (f"SourceDir s3://{bucket}/bomb.tar.gz: unpacks to more than 1,073,741,824 bytes "
                              "at member 'zeros.bin' (the limit: SDLOCAL_SOURCE_MAX_BYTES); refused")
    # a real bomb: 16 MiB of zeros in a few KiB of gzip, over a lower limit
    put(s3_client, bucket, "zeros.tar.gz", tarball([file_member("zeros.bin", bytes(16 << 20))]))
    monkeypatch.setenv("SDLOCAL_SOURCE_MAX_BYTES", str(8 << 20))
    with pytest.raises(JobError, match="unpacks to more than 8,388,608 bytes"):
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/zeros.tar.gz", tmp_path / "code2")
    assert not (tmp_path / "code2" / "zeros.bin").exists()
    monkeypatch.setenv("SDLOCAL_SOURCE_MAX_MEMBERS", "50")
    put(s3_client, bucket, "many.tar.gz", tarball([file_member(f"f{i}.py") for i in range(51)]))
    with pytest.raises(JobError, match=r"more than 50 members \(the limit: SDLOCAL_SOURCE_MAX_MEMBERS\); refused"):
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/many.tar.gz", tmp_path / "code3")
    put(s3_client, bucket, "fifty.tar.gz", tarball([file_member(f"f{i}.py") for i in range(50)]))
    fetch_source(bucket_storage(s3_client), f"s3://{bucket}/fifty.tar.gz", tmp_path / "code4")
    assert len(list((tmp_path / "code4").iterdir())) == 50
    monkeypatch.setenv("SDLOCAL_SOURCE_MAX_MEMBERS", "lots")
    with pytest.raises(JobError, match="SDLOCAL_SOURCE_MAX_MEMBERS='lots' is not a positive integer"):
        fetch_source(bucket_storage(s3_client), f"s3://{bucket}/fifty.tar.gz", tmp_path / "code5")
