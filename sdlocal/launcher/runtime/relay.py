"""A small TCP relay (asyncio, standard library only): the S3 gateway of the docker runtime.

It imports nothing from sdlocal, so the same source runs in two places:
- on the host, in a thread (`serve_in_thread`), listening on the docker bridge's gateway address
  and forwarding to the job's S3 endpoint (which may listen on 127.0.0.1 only);
- in the gateway container (`python -c <this file's source> LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT`),
  attached to the job's internal network and to the default bridge: the evaluators' only way out.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import threading

CONNECT_TIMEOUT_S = 10.0


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int) -> None:
    try:
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        writer.close()
        return
    await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))


async def start(listen_host: str, listen_port: int, target_host: str, target_port: int) -> asyncio.Server:
    return await asyncio.start_server(
        lambda r, w: _handle(r, w, target_host, target_port), listen_host, listen_port, reuse_address=True
    )


class ThreadRelay:
    """The relay on an event loop in a daemon thread; `port` is the bound port (0 picks one)."""

    def __init__(self, listen_host: str, target_host: str, target_port: int, listen_port: int = 0) -> None:
        self.listen_host = listen_host
        self._loop = asyncio.new_event_loop()
        try:
            self._server = self._loop.run_until_complete(start(listen_host, listen_port, target_host, target_port))
        except BaseException:
            self._loop.close()  # e.g. the listen address is not this host's: no loop left open
            raise
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, name="sdlocal-s3-relay", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        def _stop() -> None:
            self._server.close()
            self._loop.stop()

        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(_stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()


def main(argv: list[str]) -> int:
    listen_host, listen_port, target_host, target_port = argv[0], int(argv[1]), argv[2], int(argv[3])

    async def run() -> None:
        server = await start(listen_host, listen_port, target_host, target_port)
        print(f"relay {listen_host}:{listen_port} -> {target_host}:{target_port}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
