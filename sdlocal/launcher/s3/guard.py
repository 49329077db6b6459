"""Only the user's own clients drive the endpoints sdlocal serves (the embedded S3, `sdlocal serve`).

Neither endpoint checks signatures (boto3's dummy credentials sign every request), so what keeps a
web page the user happens to open from uploading a script and starting a job with it is this WSGI
wrapper in front of both:

- **Host**: a browser sends the name it resolved. DNS rebinding points an attacker's name at
  127.0.0.1, so a Host that is a name must be a loopback name (`localhost`, `*.localhost`) or one
  the user allowed (`SDLOCAL_ALLOWED_HOSTS`); an IP literal is no rebinding. The port must be the
  server's own, or the docker runtime's S3 gateway port (containers reach the endpoint through a TCP
  relay, with the gateway's address in their Host).
- **Origin**: browsers add it to every cross-origin request, preflights included; an Origin that is
  not this endpoint's own (`http://<Host>`) is refused, and so is `Sec-Fetch-Site: cross-site` or
  `same-site` (a form or an `<img>` of another page). SDK, boto3, the AWS CLI and notebook kernels
  send neither header.
- No CORS: moto answers every preflight permissively; its `Access-Control-*` headers are dropped.

A refusal is a 403 (AccessDenied: S3's XML, or the JSON of the SageMaker API when the request
names an `X-Amz-Target`), and one line for the server's log.
"""
from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from sdlocal.launcher.settings import GATEWAY_PORT  # noqa: F401 - the gateway's port, for the wrapper's users

ALLOWED_HOSTS = "SDLOCAL_ALLOWED_HOSTS"
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def split_host(host: str) -> tuple[str, int | None]:
    """'127.0.0.1:80' -> ('127.0.0.1', 80); '[::1]:9' -> ('::1', 9); 'a' -> ('a', None); a port that
    is not a number -> -1."""
    name, port = host, None
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    try:
        return name.lower().rstrip("."), int(port) if port is not None else None
    except ValueError:
        return name, -1


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_names(environ: dict[str, str] | None = None) -> set[str]:
    raw = (os.environ if environ is None else environ).get(ALLOWED_HOSTS, "")
    return {n.strip().lower() for n in raw.split(",") if n.strip()}


def host_refusal(host: str, ports: Iterable[int], extra_names: set[str]) -> str | None:
    """Why a request with this Host header is refused; None when it is accepted."""
    if not host:
        return "a request without a Host header"
    name, port = split_host(host)
    if not (_is_ip(name) or name == "localhost" or name.endswith(".localhost") or name in extra_names):
        return (f"Host {host!r} is not a loopback address or name (a DNS-rebinding page?); "
                f"add it to {ALLOWED_HOSTS} if it is yours")
    if (80 if port is None else port) not in set(ports):
        return f"Host {host!r} names another port than this server's"
    return None


def origin_refusal(environ: dict[str, Any]) -> str | None:
    origin = environ.get("HTTP_ORIGIN")
    host = environ.get("HTTP_HOST", "")
    if origin is not None and origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
        return f"a request from the web page origin {origin!r} (cross-origin requests are refused)"
    site = environ.get("HTTP_SEC_FETCH_SITE", "")
    if site in ("cross-site", "same-site"):
        return f"a {site} request from a web page (Sec-Fetch-Site)"
    return None


class LocalClientsOnly:
    """The WSGI wrapper; `ports`: the ports this endpoint is reached at (its own, the gateway's)."""

    def __init__(self, app: WsgiApp, ports: Iterable[int], on_refused: Callable[[str], None] | None = None,
                 extra_names: set[str] | None = None) -> None:
        self.app = app
        self.ports = set(ports)
        self.on_refused = on_refused
        self.extra_names = allowed_names() if extra_names is None else extra_names

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        why = host_refusal(environ.get("HTTP_HOST", ""), self.ports, self.extra_names) or origin_refusal(environ)
        if why is not None:
            return self._refuse(environ, start_response, why)

        def without_cors(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *args)

        return self.app(environ, without_cors)

    def _refuse(self, environ: dict[str, Any], start_response: Callable[..., Any], why: str) -> list[bytes]:
        message = f"Refused {why}: only this machine's own clients may use this endpoint"
        if self.on_refused is not None:
            self.on_refused(f"{environ.get('REQUEST_METHOD', '?')} {environ.get('PATH_INFO', '')}: {message}")
        if environ.get("HTTP_X_AMZ_TARGET"):
            body = json.dumps({"__type": "AccessDeniedException", "message": message}).encode()
            kind = "application/x-amz-json-1.1"
        else:
            escaped = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                    f"<Message>{escaped}</Message></Error>").encode()
            kind = "application/xml"
        start_response("403 Forbidden", [("Content-Type", kind), ("Content-Length", str(len(body)))])
        return [body]
