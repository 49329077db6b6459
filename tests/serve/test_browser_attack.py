"""A web page cannot drive `sdlocal serve` (launcher/s3/guard.py): a real headless Chromium opens a
page served from another origin on this machine that tries the whole chain of the attack — upload
a training script to serve's S3, then CreateTrainingJob with it — and every request is refused;
a DNS-rebinding Host is refused; boto3 keeps working."""
from __future__ import annotations

import functools
import http.client
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from sdlocal.launcher.serve.app import ServeServer
from tests.chromium import _run, require_chromium
from tests.serve.test_api import request

PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
const S = "%(serve)s";
const results = {};
async function attempt(name, call) {
  try { const r = await call(); results[name] = "answered " + r.status + " " + r.type; }
  catch (e) { results[name] = "blocked: " + e; }
}
(async () => {
  const script = "open('%(marker)s', 'w').write('pwned')\\n";
  await attempt("upload", () => fetch(S + "/sdlocal/attack/train.py", {method: "PUT", body: script}));
  await attempt("create", () => fetch(S + "/", {method: "POST", body: JSON.stringify(%(request)s),
      headers: {"X-Amz-Target": "SageMaker.CreateTrainingJob", "Content-Type": "application/x-amz-json-1.1"}}));
  await attempt("create_no_cors", () => fetch(S + "/", {method: "POST", mode: "no-cors", body: "{}",
      headers: {"Content-Type": "text/plain"}}));
  await attempt("reset", () => fetch(S + "/moto-api/reset", {method: "POST", mode: "no-cors"}));
  document.getElementById("out").textContent = "RESULTS" + JSON.stringify(results) + "END";
})();
</script></body></html>
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServeServer, list[str]]]:
    lines: list[str] = []
    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lines.append)
    srv.start()
    try:
        yield srv, lines
    finally:
        assert srv.stop(timeout=60) == []


@pytest.fixture
def attacker_site(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on another port of 127.0.0.1: another origin, as a web page is."""
    site = tmp_path / "site"
    site.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield site, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def test_a_page_from_another_origin_cannot_upload_nor_start_a_job(
        server: tuple[ServeServer, list[str]], attacker_site: tuple[Path, str], tmp_path: Path) -> None:
    chromium = require_chromium()
    srv, lines = server
    site, origin = attacker_site
    marker = tmp_path / "pwned.txt"
    req = request("attack")
    req["HyperParameters"]["sagemaker_program"] = '"train.py"'
    (site / "attack.html").write_text(PAGE % {"serve": srv.url, "marker": marker, "request": json.dumps(req)})
    result = _run(chromium, ["--virtual-time-budget=15000", "--dump-dom", f"{origin}/attack.html"],
                  tmp_path / "profile")
    dom = result.stdout
    assert "RESULTS" in dom, f"the page did not finish: {dom[-2000:]} {result.stderr[-2000:]}"
    results = json.loads(dom[dom.index("RESULTS") + len("RESULTS"):dom.index("END")])
    # the browser could not read or make anything of any answer
    assert results["upload"].startswith("blocked") and results["create"].startswith("blocked"), results
    # each request did reach serve, and each was refused there (preflights and no-cors posts alike)
    refused = [line for line in lines if "Refused a request from the web page origin" in line
               or "Refused a same-site request" in line]
    assert any(line.startswith("Warning: OPTIONS /sdlocal/attack/train.py") for line in refused), lines
    assert any(line.startswith("Warning: OPTIONS /:") for line in refused), lines
    assert any(line.startswith("Warning: POST /moto-api/reset") for line in refused), lines
    # nothing stored, no job, nothing ran
    s3 = srv.client("s3")
    assert s3.list_objects_v2(Bucket="sdlocal", Prefix="attack/").get("KeyCount") == 0
    assert srv.api.jobs == {} and not marker.exists()


def test_a_rebinding_host_is_refused_and_the_sdks_clients_are_served(server: tuple[ServeServer, list[str]]) -> None:
    srv, lines = server
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    body = json.dumps(request("rebound")).encode()
    conn.request("POST", "/", body=body, headers={
        "Host": f"attacker.example:{srv.port}", "X-Amz-Target": "SageMaker.CreateTrainingJob",
        "Content-Type": "application/x-amz-json-1.1"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 403 and answer["__type"] == "AccessDeniedException"
    assert "Host 'attacker.example:" in answer["message"] and "not a loopback address or name" in answer["message"]
    assert srv.api.jobs == {}
    sm = boto3.client("sagemaker", endpoint_url=srv.url, region_name="us-east-1",
                      aws_access_key_id="x", aws_secret_access_key="x")
    assert sm.list_training_jobs()["TrainingJobSummaries"] == []
    local = boto3.client("sagemaker", endpoint_url=f"http://localhost:{srv.port}", region_name="us-east-1",
                         aws_access_key_id="x", aws_secret_access_key="x")
    assert local.list_training_jobs()["TrainingJobSummaries"] == []
