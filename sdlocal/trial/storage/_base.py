"""The storage a trial lives on: a local directory or an S3 prefix. Keys are relative to the root
and always use "/"."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path


class Storage(ABC):
    # True where read_range fills a buffer of the reader's own (and honours `aligned_at`)
    fills_own_buffers = False
    # True where map_range maps files (large values are then views of a private mapping)
    maps_files = False
    # True where a small ranged read costs little beside a large one (not over HTTP: an S3 server
    # may read the whole object for each ranged GET, as moto does)
    cheap_small_reads = True

    @property
    def outage_wait_s(self) -> float:
        """How long a reader should wait for data that vanished from the storage to come back (an
        S3 endpoint that restarted empty, its objects uploaded again); 0: it never comes back."""
        return 0.0

    @property
    @abstractmethod
    def uri(self) -> str:
        """Where the trial lives (a path, or s3://bucket/prefix)."""

    @abstractmethod
    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        """The object's bytes, or `length` bytes from `start` (a ranged read). Raises
        FileNotFoundError when the key does not exist."""

    def read_range(self, key: str, start: int, length: int, aligned_at: int | None = None,
                   locate: Callable[[memoryview], int | None] | None = None) -> memoryview:
        """A ranged read for decoding in place: writable where the backend can fill a buffer of
        the reader's own (then values are views into it, no copy), else read-only (copied on
        decode, into aligned memory). `aligned_at`: a backend filling a buffer of its own places
        that byte of the range on a 64-byte boundary; without it, `locate` (given the range's
        first bytes, as many as the backend has at hand) may say which byte, in the same read."""
        return memoryview(self.read(key, start, length))

    def map_range(self, key: str, start: int, length: int) -> memoryview | None:
        """Bytes [start, start + length) of `key` as a private copy-on-write mapping of the file
        (writable; writes stay in this process and in this mapping), or None where the backend
        cannot map (the caller reads instead). Raises FileNotFoundError for a missing key."""
        return None

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Write the whole object atomically (readers never see a partial object)."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
        """Keys under `prefix` (a key prefix, not only a folder), sorted, strictly after
        `start_after` when given. Temporary `.tmp` files are listed only with `include_tmp` (a
        trial's reader never wants them; copying or deleting a whole prefix does)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""

    # What the platform needs besides a trial's reads and writes (uploads from disk, downloads to
    # disk, clearing a prefix, creating the bucket). The defaults work through the methods above;
    # S3Storage does each in fewer or streaming requests.

    def write_file(self, key: str, path: str | Path) -> None:
        """Store the file at `path` as `key` (whole, like `write`)."""
        self.write(key, Path(path).read_bytes())

    def read_to_file(self, key: str, path: str | Path) -> None:
        """Copy `key` into the file `path` (its folder must exist); FileNotFoundError when missing."""
        Path(path).write_bytes(self.read(key))

    def delete_many(self, keys: Iterable[str]) -> None:
        """Remove every key; missing ones are not an error."""
        for key in keys:
            self.delete(key)

    def any_key(self, prefix: str = "") -> bool:
        """Whether some key (`.tmp` included) starts with `prefix`."""
        return bool(self.list(prefix, include_tmp=True))

    def ensure_root(self) -> None:  # noqa: B027 - optional: only backends with a container to create override it
        """Make the storage's container exist (an S3 bucket). A local folder needs nothing: writes
        create their folders."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"
