"""The report's annotation section states inter-annotator agreement per round (issue 13, item 7)."""

from __future__ import annotations

import pandas as pd

import receval
from receval.report.html import section_html


def test_agreement_is_in_the_report_and_in_agreement_csv(tmp_path):
    task = receval.simulate(
        tmp_path / "two", systems=5, queries=30, per_system=30, annotators=2,
        annotator_error=0.1, seed=4,
    )  # fmt: skip
    out = receval.score(task, bootstrap=60, allow_pending=True).write(tmp_path / "out")
    agreement = pd.read_csv(out / "agreement.csv")
    assert len(agreement) == 1 and 0.0 < agreement["alpha"].iloc[0] < 1.0
    section = section_html((out / "report.html").read_text(encoding="utf-8"), "annotation")
    assert "Krippendorff" in section and f"{agreement['alpha'].iloc[0]:.3f}" in section
