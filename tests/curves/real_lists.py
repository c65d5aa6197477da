"""Real ranked lists with complete labels from ``../shared/data`` (None when absent)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def parabank_by_model_score(threshold: float = 70.0) -> np.ndarray | None:
    """ParaBank-Eval: 5,550 pooled paraphrases ranked by the model's NLL (most likely first).

    A paraphrase is correct when its mean human score is ≥ ``threshold`` (0-100 scale);
    every item is judged, so p(r) is known exactly.
    """
    path = DATA / "parabank-eval" / "candidates.tsv.gz"
    if not path.exists():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = pd.read_csv(fh, sep="\t", quoting=3, keep_default_na=False, na_values=[""])
    raw["score"] = raw["human_score"].fillna(0.0)  # gm = 0 (nonsensical) has no score
    items = raw.groupby(["ref_id", "candidate"], sort=True).agg(
        nll=("NLL", "max"), score=("score", "mean")
    )
    items = items[items["nll"] >= 0]  # -1 / -2 are sentinels (references, ParaNMT)
    order = np.argsort(items["nll"].to_numpy(), kind="stable")
    return (items["score"].to_numpy()[order] >= threshold).astype(np.float64)


def ppdb_by_proxy_score() -> np.ndarray | None:
    """PPDB 2.0 human labels (correct: mean rating ≥ 3) ranked by the sum of two ratings.

    The PPDB score itself is not in the data, so two of the five ratings serve as a noisy
    model score (ties keep file order).
    """
    path = DATA / "ppdb2-human" / "ppdb-sample.tsv"
    if not path.exists():
        return None
    frame = pd.read_csv(path, sep="\t", header=None, quoting=3)
    ratings = frame[4].str.split(",", expand=True).astype(float)
    order = np.argsort(-(ratings[0] + ratings[1]).to_numpy(), kind="stable")
    return (frame[0] >= 3).to_numpy(np.float64)[order]
