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


def ppdb_wiki_by_proxy_score() -> np.ndarray | None:
    """The second PPDB 2.0 human sample (13,954 pairs, ``wiki-sample.tsv``), ranked and
    labelled as :func:`ppdb_by_proxy_score`."""
    path = DATA / "ppdb2-human" / "wiki-sample.tsv"
    if not path.exists():
        return None
    frame = pd.read_csv(path, sep="\t", header=None, quoting=3)
    ratings = frame[4].str.split(",", expand=True).astype(float)
    order = np.argsort(-(ratings[0] + ratings[1]).to_numpy(), kind="stable")
    return (frame[0] >= 3).to_numpy(np.float64)[order]


def _words(text: str) -> set[str]:
    return {w for w in "".join(c.lower() if c.isalnum() else " " for c in text).split() if w}


def msmarco_answers() -> tuple[np.ndarray, np.ndarray] | None:
    """Chaganty et al.'s MS MARCO answers (1,854 judged, five systems) in file order: (labels,
    automatic scores).

    The score (a crude automatic judge, no human input) is the share of the answer's words
    found in the passages MS MARCO marks as selected; the label is correct when the mean of the
    three crowd judgments (``AvgCorrect``) is ≥ ½ (7 items without one are left out).
    """
    import json

    path = DATA / "chaganty-active-eval" / "qa.jsonl.gz"
    if not path.exists():
        return None
    scores, labels = [], []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["output"].get("AvgCorrect") is None:
                continue
            contents = row["input"]["contents"]
            answer = _words(contents.get("answer") or "")
            chosen = set().union(
                *(_words(p["passage_text"]) for p in contents["passages"] if p["is_selected"])
            )
            scores.append(len(answer & chosen) / len(answer) if answer else 0.0)
            labels.append(float(row["output"]["AvgCorrect"] >= 0.5))
    return np.array(labels), np.array(scores)


def msmarco_by_overlap() -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`msmarco_answers` ranked by the automatic score (ties keep file order)."""
    found = msmarco_answers()
    if found is None:
        return None
    labels, score = found
    order = np.argsort(-score, kind="stable")
    return labels[order], score[order]


def tac_fixture_runs_by_confidence() -> np.ndarray | None:
    """The three runs of the TAC Cold Start scorer test suite, pooled and ranked by their
    confidence; a response is correct when its assessment (matched on query, filler and filler
    provenance) is C, wrong otherwise (W, X or unassessed)."""
    root = DATA / "tac-kbp-coldstart-scorer-fixtures"
    if not root.exists():
        return None
    confidence, labels = [], []
    for case in sorted(p for p in root.iterdir() if p.is_dir()):
        qrel = {}
        for line in (case / "qrel.txt").read_text().splitlines():
            f = line.split("\t")
            if len(f) >= 6:
                qrel[(f[1], f[3], f[4])] = f[5]
        for run in case.glob("*.valid.ldc.tab.txt"):
            for line in run.read_text().splitlines():
                f = line.split("\t")
                if len(f) >= 8:
                    key = (f"{f[0]}:{f[1]}", f[4], f[6])
                    confidence.append(float(f[7]))
                    labels.append(float(qrel.get(key) == "C"))
    order = np.argsort(-np.array(confidence), kind="stable")
    return np.array(labels)[order]
