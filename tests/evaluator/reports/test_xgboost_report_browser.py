"""The XGBoost training report as a person sees it: headless Chromium renders the page written by
CreateXgboostReport for a real xgboost training, and the test checks the pixels where its plots,
the confusion matrix and the tables are.

SDLOCAL_UPDATE_SCREENSHOTS=1 also writes the top of the page (down to the confusion matrix) to
docs/images/xgboost-report.png (the README's screenshot)."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from detection import xgb as runs
from sdlocal.evaluator.reports.xgboost import XgboostReportInput, render_xgboost_report
from sdlocal.trial import create_trial
from tests.chromium import RenderedPage, render_page
from tests.evaluator.reports._html import parse_page

SELECTORS = ["figure.plot svg", "table", "div.cards .card", "section h2"]
SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "xgboost-report.png"
COLLECTIONS = ["metrics", "losses", "hyperparameters", "predictions", "labels", "feature_importance",
               "average_shap", "full_shap"]


def _page(tmp_path: Path) -> tuple[RenderedPage, list[str]]:
    request = {"HookParameters": {"save_interval": "2"},
               "CollectionConfigurations": [{"CollectionName": c} for c in COLLECTIONS]}
    runs.train_xgb(replace(runs.healthy_xgb(), n=1500, rounds=30), tmp_path / "trial", request)
    data = XgboostReportInput.from_trial(create_trial(tmp_path / "trial"), job_name="xgboost-healthy")
    html = render_xgboost_report(data)
    page_file = tmp_path / "xgboost_report.html"
    page_file.write_text(html, encoding="utf-8")
    return render_page(page_file, tmp_path, SELECTORS), parse_page(html).figure_titles


def test_xgboost_report_in_chromium(tmp_path: Path) -> None:
    page, titles = _page(tmp_path)
    headings = [t.strip() for t in page.texts["section h2"]]
    assert headings == ["Metrics", "Feature importance", "SHAP values", "Confusion matrix",
                        "Label and prediction distribution", "Hyperparameters"]
    assert titles[0] == "logloss" and any(t.startswith("Confusion matrix") for t in titles)
    boxes = page.boxes["figure.plot svg"]
    assert len(boxes) == len(titles) == 8  # logloss, 3 importance types, SHAP, confusion, 2 distributions
    for box, title in zip(boxes, titles, strict=True):
        assert box.width > 900 and box.height > 150, (title, box)  # laid out full width
        assert page.ink(box) > 0.02, title  # axes, labels and data, not a blank area
        assert page.saturated_share(box) > 0.004, title  # the data, in colour
    assert [b.y for b in boxes] == sorted(b.y for b in boxes)  # in document order, not overlapping
    for a, b in zip(boxes, boxes[1:], strict=False):
        assert a.y + a.height <= b.y
    confusion = boxes[next(i for i, t in enumerate(titles) if t.startswith("Confusion matrix"))]
    # a good classifier: two dark blue diagonal cells, two pale ones
    crop = page.crop(confusion).astype(np.int32)
    dark_blue = (crop[..., 2] > 90) & (crop[..., 0] < 60) & (crop[..., 2] - crop[..., 0] > 60)
    assert dark_blue.mean() > 0.05
    cards = page.texts["div.cards .card"]
    assert any("saved rounds" in c and "15" in c for c in cards)
    assert len(page.boxes["table"]) >= 4  # metrics, importance, classification report, hyperparameters
    for box in page.boxes["table"]:
        assert page.ink(box) > 0.01
    if os.environ.get("SDLOCAL_UPDATE_SCREENSHOTS"):
        from PIL import Image

        bottom = min(page.pixels.shape[0], confusion.y + confusion.height + 40)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.ascontiguousarray(page.pixels[:bottom])).save(SCREENSHOT, optimize=True)
