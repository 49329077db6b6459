"""Look at an HTML report as a person does: Debian's headless Chromium lays it out and takes a
screenshot; the test then checks pixels where the page's elements are.

    page = render_page(html_file, tmp_path, selectors=["figure.plot svg", "table.rules tbody tr"])
    for box in page.boxes["figure.plot svg"]:
        assert page.ink(box) > 0.02           # something is drawn there, not a blank area

Two Chromium runs share one window width: the first opens a copy of the page with a small script
added (and the page's Content-Security-Policy removed so that script may run) that writes the
page coordinates of the selected elements into the title, read back with --dump-dom; the second
screenshots the page itself, untouched, at its full height. The script does not render, so both
runs lay the page out the same way.

`require_chromium()` skips a test where Chromium is missing, but fails it under CI=true (.ci/run
installs Debian's `chromium`). Reusable by any report test (ProfilerReport, the XGBoost report).
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# No background network at all (this machine has none; Chromium would try Google's hosts), a fresh
# profile each run, CSS pixels = screenshot pixels.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--force-device-scale-factor=1", "--hide-scrollbars", "--mute-audio",
)
RUN_TIMEOUT_S = 90
MAX_HEIGHT = 16000  # Chromium's largest screenshot texture


def find_chromium() -> str | None:
    env = os.environ.get("SDLOCAL_CHROMIUM")
    if env:
        return env
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> str:
    path = find_chromium()
    if path is None:
        msg = "headless Chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg + ": .ci/run installs it; a CI run must check the reports in a browser")
        pytest.skip(msg)
    return path


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class RenderedPage:
    png: Path
    pixels: np.ndarray  # height x width x 3, uint8
    boxes: dict[str, list[Box]]
    texts: dict[str, list[str]]  # the innerText of each selected element, in document order
    height: int

    def crop(self, box: Box) -> np.ndarray:
        return self.pixels[box.y:box.y + box.height, box.x:box.x + box.width]

    def ink(self, box: Box, background: tuple[int, int, int] = (255, 255, 255), tolerance: int = 24) -> float:
        """The share of the box's pixels that differ from the background colour."""
        area = self.crop(box).astype(np.int16)
        if area.size == 0:
            return 0.0
        diff = np.abs(area - np.array(background, dtype=np.int16)).max(axis=2)
        return float((diff > tolerance).mean())

    def colour_share(self, box: Box, rgb: tuple[int, int, int], tolerance: int = 40) -> float:
        """The share of the box's pixels close to `rgb` (a line colour, a badge colour)."""
        area = self.crop(box).astype(np.int16)
        if area.size == 0:
            return 0.0
        return float((np.abs(area - np.array(rgb, dtype=np.int16)).max(axis=2) <= tolerance).mean())

    def saturated_share(self, box: Box, min_chroma: int = 60) -> float:
        """The share of strongly coloured pixels (data drawn in colour, not grey axes or black text)."""
        area = self.crop(box).astype(np.int16)
        if area.size == 0:
            return 0.0
        return float(((area.max(axis=2) - area.min(axis=2)) >= min_chroma).mean())


_LAYOUT_SCRIPT = """<script>(function(){var out={boxes:{},texts:{}},sel=%s;
sel.forEach(function(s){out.boxes[s]=[];out.texts[s]=[];document.querySelectorAll(s).forEach(function(e){
var r=e.getBoundingClientRect();out.boxes[s].push([Math.round(r.left+scrollX),Math.round(r.top+scrollY),
Math.round(r.width),Math.round(r.height)]);out.texts[s].push(e.innerText||e.textContent||"");});});
out.height=Math.ceil(Math.max(document.documentElement.scrollHeight,document.body.scrollHeight));
document.title="LAYOUT:"+JSON.stringify(out);})();</script>"""
_CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>', re.IGNORECASE)


def _run(chromium: str, args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if result.returncode != 0:
        raise AssertionError(f"chromium failed (exit {result.returncode}): {result.stderr[-2000:]}")
    return result


def layout(html_file: Path, selectors: list[str], width: int, workdir: Path,
           chromium: str | None = None) -> tuple[dict[str, list[Box]], dict[str, list[str]], int]:
    """Page coordinates of every element matching each selector, their texts, and the page height."""
    chromium = chromium or require_chromium()
    text = html_file.read_text(encoding="utf-8")
    probe = _CSP_META.sub("", text, count=1)
    script = _LAYOUT_SCRIPT % json.dumps(selectors)
    probe = probe.replace("</body>", script + "</body>", 1) if "</body>" in probe else probe + script
    probe_file = workdir / (html_file.stem + ".layout.html")
    probe_file.write_text(probe, encoding="utf-8")
    with tempfile.TemporaryDirectory(dir=workdir) as profile:
        dom = _run(chromium, ["--dump-dom", f"--window-size={width},1000", probe_file.as_uri()], Path(profile)).stdout
    m = re.search(r"<title>LAYOUT:(.*?)</title>", dom, re.DOTALL)
    if m is None:
        raise AssertionError("the layout probe did not run (no LAYOUT title in the dumped DOM)")
    data = json.loads(html.unescape(m.group(1)))
    boxes = {s: [Box(*b) for b in data["boxes"][s]] for s in selectors}
    return boxes, data["texts"], int(data["height"])


def screenshot(html_file: Path, png: Path, width: int, height: int, chromium: str | None = None) -> Path:
    chromium = chromium or require_chromium()
    with tempfile.TemporaryDirectory(dir=png.parent) as profile:
        _run(chromium, [f"--screenshot={png}", f"--window-size={width},{height}", html_file.as_uri()],
             Path(profile))
    if not png.is_file():
        raise AssertionError(f"chromium wrote no screenshot at {png}")
    return png


def render_page(html_file: Path, workdir: Path, selectors: list[str], width: int = 1280) -> RenderedPage:
    """Lay the page out, screenshot all of it, decode the PNG."""
    from PIL import Image

    chromium = require_chromium()
    boxes, texts, height = layout(html_file, selectors, width, workdir, chromium)
    height = min(MAX_HEIGHT, max(200, height))
    png = screenshot(html_file, workdir / (html_file.stem + ".png"), width, height, chromium)
    with Image.open(png) as im:
        pixels = np.asarray(im.convert("RGB"))
    return RenderedPage(png, pixels, boxes, texts, height)
