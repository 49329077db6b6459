"""Which containers the engine created for a job, from a subscription taken before the job starts:
the engine keeps only its last 256 events, so a query after a job, while other tests' jobs create,
start and remove containers, may find none of them (it did, on CI)."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def created_containers(docker_client: Any, job: str) -> Iterator[list[dict[str, str]]]:
    """The labels and image of every container created for `job` (label sdlocal.job) while the
    block runs, filled as the engine reports them."""
    stream = docker_client.events(decode=True, filters={"type": "container", "event": "create",
                                                        "label": f"sdlocal.job={job}"})
    created: list[dict[str, str]] = []

    def read() -> None:
        try:
            for event in stream:
                created.append(event["Actor"]["Attributes"])
        except Exception:  # noqa: BLE001 - the stream closed under the reader: the block has ended
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield created
    finally:
        time.sleep(1)  # the engine's last events of the job reach the stream
        stream.close()
        reader.join(10)
