"""The embedded S3: `python -m sdlocal.launcher.s3.server --port P [--data-dir DIR]` serves moto's S3 on
127.0.0.1 until SIGTERM/SIGINT. With `--data-dir` (what `sdlocal.launcher.s3.endpoint.EmbeddedS3` starts it with:
`$SDLOCAL_HOME/s3-data`) its objects live on disk and are served from there, nothing loaded at start
(launcher/s3/store.py, launcher/s3/moto_disk.py); without, it is a plain moto server (memory only)."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def pin_malloc() -> None:
    """glibc keeps what a thread freed in that thread's arena (werkzeug runs a thread per request:
    up to 8 arenas per core), so a server whose objects are all on disk held tens of MB of bodies
    long gone. Two arenas bound that. (A fixed mmap threshold, which would give every large body
    back at once, made each 1 MiB PUT page-fault its buffers anew: half the PUT throughput.)"""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(-8, 2)  # M_ARENA_MAX
    except OSError:  # not glibc: its own allocator's ways
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sdlocal.launcher.s3.server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not one line per request

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app: Any = DomainDispatcherApplication(create_backend_app)
    if args.data_dir is not None:
        pin_malloc()
        from moto.s3.models import s3_backends

        from sdlocal.launcher.s3.moto_disk import Persisting, install_hooks, open_buckets
        from sdlocal.launcher.s3.store import DiskStore

        store = DiskStore(args.data_dir)
        started = time.monotonic()
        install_hooks(store)
        buckets = open_buckets(store, lambda account, partition: s3_backends[account][partition])
        logging.getLogger("sdlocal.s3").info("serving %d bucket(s) from %s (opened in %.2f s)", buckets,
                                             args.data_dir, time.monotonic() - started)
        app = Persisting(app, logging.getLogger("sdlocal.s3"))

    from sdlocal.launcher.s3.guard import GATEWAY_PORT, LocalClientsOnly

    refusals = logging.getLogger("sdlocal.s3.guard")
    app = LocalClientsOnly(app, ports=(args.port, GATEWAY_PORT), on_refused=refusals.warning)
    server = make_server(args.host, args.port, app, threaded=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="s3", daemon=True)
    thread.start()
    try:
        while not stop.wait(3600):  # woken by the signal handler
            pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
