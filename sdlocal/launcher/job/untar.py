"""Unpacking an archive someone else built (the SDK's sourcedir.tar.gz) without letting it write
outside its folder, on every supported Python whatever its patch level.

tarfile's own `data` filter is not relied on: before 3.10.18 / 3.11.13 / 3.12.11 / 3.13.4 it checks
links with `os.path.realpath`, which gives up past PATH_MAX, and CVE-2025-4517's archives (symlinks
nested until the path is too long to resolve) walk out through that gap. Here nothing is resolved
on the file system. Every member's path is checked as text; links are resolved as text too,
through the archive's own symlinks, and must end inside the folder:

1. the members are read in one streaming pass, which stops at the first one over a limit (count,
   unpacked bytes, name length) and checks each name and link;
2. directories and regular files are written, through no link at all (none exists yet: every
   file is opened with O_NOFOLLOW and every folder checked to be a real folder), hard links made
   to files written in this step;
3. symlinks are made last: none of them can be written through.

A member below a symlink of the archive (`lib -> elsewhere`, then `lib/x.py`) is refused: tar
itself never writes one so. Modes keep their read and execute bits; setuid, setgid, sticky and
group/other write bits are dropped, as the `data` filter does. Owners are not restored.
"""
from __future__ import annotations

import os
import posixpath
import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

PATH_MAX = 4096
NAME_MAX = 255
MAX_SYMLINK_HOPS = 40  # the kernel's own limit on links followed in one lookup


class UnsafeArchive(ValueError):
    """A member the archive may not unpack; the message names it and ends with '; refused'."""


@dataclass(frozen=True)
class Limits:
    members: int
    bytes: int


def normalized_path(name: str) -> str | None:
    """`./a//b/` -> 'a/b'; '' for the folder itself; None for a name that climbs out or is absolute."""
    if name.startswith("/") or "\x00" in name:
        return None
    depth = 0
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            depth -= 1
            if depth < 0:
                return None
            parts.pop()
            continue
        depth += 1
        parts.append(part)
    return "/".join(parts)


def _check_length(member: tarfile.TarInfo) -> None:
    for text in (member.name, member.linkname):
        if len(text.encode("utf-8", "surrogateescape")) > PATH_MAX or any(
                len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in text.split("/")):
            raise UnsafeArchive(f"member {member.name[:80]!r}... has a name longer than the file system's "
                                f"limits ({NAME_MAX} bytes a name, {PATH_MAX} a path); refused")


def read_members(tar: tarfile.TarFile, limits: Limits) -> list[tarfile.TarInfo]:
    """Every member, in order, each name and kind checked; stops at the first member over a limit."""
    members: list[tarfile.TarInfo] = []
    total = 0
    while (member := tar.next()) is not None:
        members.append(member)
        if len(members) > limits.members:
            raise UnsafeArchive(f"more than {limits.members:,} members (the limit: "
                                f"SDLOCAL_SOURCE_MAX_MEMBERS); refused")
        if member.isfile():
            total += member.size
            if total > limits.bytes:
                raise UnsafeArchive(f"unpacks to more than {limits.bytes:,} bytes at member {member.name!r} "
                                    f"(the limit: SDLOCAL_SOURCE_MAX_BYTES); refused")
        _check_length(member)
        if normalized_path(member.name) is None:
            raise UnsafeArchive(f"member {member.name!r} would be extracted outside the code folder; refused")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise UnsafeArchive(f"member {member.name!r} is a device or FIFO; refused")
    return members


class _Links:
    """The archive's symlinks (normalized name -> target as written), resolved as text."""

    def __init__(self, members: list[tarfile.TarInfo]) -> None:
        self.targets: dict[str, str] = {}
        for member in members:  # a later member of the same name replaces an earlier one
            name = normalized_path(member.name) or ""
            if member.issym():
                self.targets[name] = member.linkname
            else:
                self.targets.pop(name, None)

    def below_a_link(self, name: str) -> str | None:
        """The symlink of the archive that `name` would be written through, if any."""
        parts = name.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if prefix in self.targets:
                return prefix
        return None

    def resolve(self, name: str) -> str | None:
        """Where `name` ends up inside the folder after following the archive's symlinks, as a
        normalized relative path; None when it leaves the folder, or loops."""
        pending = [p for p in name.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if not done:
                    return None
                done.pop()
                continue
            here = "/".join([*done, part])
            target = self.targets.get(here)
            if target is None:
                done.append(part)
                continue
            hops += 1
            if hops > MAX_SYMLINK_HOPS or target.startswith("/"):
                return None
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending  # relative to `done`
        resolved = "/".join(done)
        return resolved if len(resolved) <= PATH_MAX else None


def _real_folder(root: Path, rel: str) -> Path:
    """`root/rel` as a real folder (made where missing), no component of it a link."""
    path = root
    for part in [p for p in rel.split("/") if p]:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            os.mkdir(path, 0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise UnsafeArchive(f"{rel!r} is not a folder in the unpacked code; refused")
    return path


def _file_mode(member: tarfile.TarInfo) -> int:
    return (member.mode & 0o755) | 0o600  # no setuid/setgid/sticky, no group/other write


def extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Unpack `members` (from `read_members`) into `dest` as the module docstring says."""
    links = _Links(members)
    final = {(normalized_path(m.name) or ""): m for m in members}  # the last member of each name wins
    written: dict[str, Path] = {}
    for member in members:
        name = normalized_path(member.name) or ""
        through = links.below_a_link(name)
        if through is not None:
            raise UnsafeArchive(f"member {member.name!r} would be written through the link {through!r}; refused")
        if member.issym():
            resolved = links.resolve(name)
            if resolved is None:
                raise UnsafeArchive(f"link {member.name!r} -> {member.linkname!r} points outside the code folder; "
                                    "refused")
        elif member.islnk():
            target = normalized_path(member.linkname)
            source = final.get(target) if target is not None else None
            if source is None or not source.isfile() or links.below_a_link(target or "") is not None:
                raise UnsafeArchive(f"link {member.name!r} -> {member.linkname!r} points outside the code folder "
                                    "(a hard link must name a regular file of the archive); refused")
    for member in members:  # 2. folders, files, hard links: no symlink exists yet
        name = normalized_path(member.name) or ""
        if final[name] is not member or member.issym():
            continue
        if member.isdir():
            _real_folder(dest, name)
            continue
        parent = _real_folder(dest, posixpath.dirname(name))
        path = parent / posixpath.basename(name)
        if member.islnk():
            source_path = written.get(normalized_path(member.linkname) or "")
            if source_path is None:
                raise UnsafeArchive(f"hard link {member.name!r} comes before its file {member.linkname!r}; refused")
            try:
                os.link(source_path, path, follow_symlinks=False)
            except OSError:
                shutil.copyfile(source_path, path, follow_symlinks=False)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, _file_mode(member))
        with os.fdopen(fd, "wb") as out:
            data = tar.extractfile(member)
            if data is not None:
                shutil.copyfileobj(data, out, 1 << 20)
            os.fchmod(out.fileno(), _file_mode(member))
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)
        written[name] = path
    for member in members:  # 3. symlinks, last
        name = normalized_path(member.name) or ""
        if final[name] is not member or not member.issym():
            continue
        path = _real_folder(dest, posixpath.dirname(name)) / posixpath.basename(name)
        os.symlink(member.linkname, path)
