"""The embedded S3: `python -m launcher._s3_server --port P` runs moto's ThreadedMotoServer (quiet)
on 127.0.0.1 until SIGTERM/SIGINT. Started detached by `launcher.s3.EmbeddedS3`."""
from __future__ import annotations

import argparse
import signal
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher._s3_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    from moto.server import ThreadedMotoServer

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    try:
        while not stop.wait(3600):  # woken by the signal handler
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
