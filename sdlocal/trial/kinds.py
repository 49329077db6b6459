"""smdebug's ways of opening a trial: `create_trial(path, name=None, **kwargs)`, `LocalTrial` and
`S3Trial` (what `smdebug.trials` exports).

As smdebug's, they wait for the collections files before loading the index: a notebook may open
a trial before the training job has written anything. Unlike smdebug's (which waits forever),
the wait has a deadline (`collections_timeout`, MissingCollectionFiles when it passes), and it
ends at once with MissingCollectionFiles when training has ended without them.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from sdlocal.trial.errors import SMDebugNotImplementedError
from sdlocal.trial.storage import LocalStorage, S3Storage, Storage, parse_s3_uri
from sdlocal.trial.trial import Trial, logger

COLLECTIONS_TIMEOUT_S = 600.0
_POLLS_BEFORE_WARNING = 10  # as smdebug: say something after ~20 s of waiting


def _warning_sleep(trial: Trial, sleep: Callable[[float], None]) -> Callable[[float], None]:
    polls = [0]

    def wrapped(seconds: float) -> None:
        polls[0] += 1
        if polls[0] == _POLLS_BEFORE_WARNING:
            logger.warning(
                "Waiting to read the collections files written by the training job at %s. If this has "
                "been a while, check that the trial is pointed at the right path.", trial.path)
        sleep(seconds)

    return wrapped


class _OpenedTrial(Trial):
    """A trial that waits for its collections and loads its index when built."""

    def __init__(
        self,
        storage: Storage,
        name: str | None,
        range_steps: tuple[int | None, int | None] | None,
        *,
        check: bool,
        index_mode: bool,
        cache: bool,
        collections_timeout: float,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
    ) -> None:
        if range_steps is not None:
            begin, end = range_steps
            if begin is not None and end is not None and end <= begin:
                raise ValueError("range_steps should be of the form (begin, end) where begin is less than end")
        super().__init__(storage, name=name, range_steps=range_steps)
        # smdebug's options, kept for code that reads them: sdlocal always reads through the
        # index, always checks record CRCs and never caches values.
        self.check = check
        self.index_mode = index_mode
        self.cache = cache
        logger.info("Loading trial %s at path %s", self.name, self.path)
        self.wait_for_collections(collections_timeout, sleep=_warning_sleep(self, sleep), clock=clock)
        self.refresh()


class LocalTrial(_OpenedTrial):
    def __init__(
        self,
        name: str | None,
        dirname: str,
        range_steps: tuple[int | None, int | None] | None = None,
        parallel: bool = True,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
        *,
        collections_timeout: float = COLLECTIONS_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.parallel = parallel
        self.trial_dir = os.path.expanduser(dirname)
        super().__init__(LocalStorage(self.trial_dir), name, range_steps, check=check, index_mode=index_mode,
                         cache=cache, collections_timeout=collections_timeout, sleep=sleep, clock=clock)


class S3Trial(_OpenedTrial):
    def __init__(
        self,
        name: str | None,
        bucket_name: str,
        prefix_name: str,
        range_steps: tuple[int | None, int | None] | None = None,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
        *,
        s3_client: Any = None,
        endpoint_url: str | None = None,
        collections_timeout: float = COLLECTIONS_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bucket_name = bucket_name
        self.prefix_name = prefix_name.strip("/") + "/" if prefix_name.strip("/") else ""
        storage = S3Storage(bucket_name, prefix_name, client=s3_client, endpoint_url=endpoint_url)
        super().__init__(storage, name, range_steps, check=check, index_mode=index_mode, cache=cache,
                         collections_timeout=collections_timeout, sleep=sleep, clock=clock)


def open_trial(path: str, name: str | None = None, profiler: bool = False, output_dir: str | None = None,
               **kwargs: Any) -> Trial:
    """smdebug's `create_trial`: a LocalTrial or an S3Trial (s3://bucket/prefix), named after the
    path's last component unless `name` is given. Keyword arguments: smdebug's `range_steps`,
    `check`, `index_mode`, `cache` (`parallel` for local paths), and sdlocal's
    `collections_timeout`, `s3_client`, `endpoint_url` (S3; default: boto3's resolution, which
    honours AWS_ENDPOINT_URL_S3)."""
    if profiler:
        raise SMDebugNotImplementedError(
            "create_trial(..., profiler=True): sdlocal reads debugger trials only, not profiler trials")
    path = str(path).strip()
    if path.startswith("s3://"):
        bucket, prefix = parse_s3_uri(path)
        return S3Trial(name or prefix.rsplit("/", 1)[-1] or bucket, bucket, prefix, **kwargs)
    return LocalTrial(name or os.path.basename(path.rstrip("/")) or path, path, **kwargs)
