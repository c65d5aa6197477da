"""The small tables of a bundle checked (queries, judgments, samples, exhaustive units and
facts, truth) and the checks across tables (samples against the outputs, ``[universe] size``
against the pool).  Every problem is a :class:`~receval.errors.BundleError` naming the file and
line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from receval.bundle.sources import _require, _Source
from receval.config import TaskConfig, unknown_label_text
from receval.errors import BundleError
from receval.formats.checks import (
    check_queries_known,
    nonempty,
    numbers,
    raise_first_bad,
    unique_values,
)
from receval.formats.coded import system_codes
from receval.formats.tables import LINE


def _check_universe(config: TaskConfig, files: dict[str, Path], pooled: int) -> None:
    """``[universe] size`` counts the candidate items, and every fact a system output is one:
    a smaller size is a mistake (Dimm's prevalence would exceed 1 in every row)."""
    size = config.universe_size
    if size is None or size >= pooled:
        return
    from receval.config import universe_line

    path = files.get("task.toml", Path("task.toml"))
    raise BundleError(
        path,
        universe_line(path),
        f"[universe] size {size:,} is smaller than the {pooled:,} distinct facts the runs "
        "output (each output is a candidate item): give the number of candidates",
    )


def _check_queries(src: _Source) -> pd.DataFrame:
    frame, path = src.frame, src.path
    _require(src, ("query_id",), "queries")
    if frame.empty:
        raise BundleError(path, src.first_row, f"no queries: {src.no_rows}")
    nonempty(frame, path, ("query_id",))
    unique_values(frame, path, "query_id")
    if "weight" in frame.columns:
        w = numbers(frame, path, "weight", allow_empty=False)
        raise_first_bad(frame, path, w <= 0, "column 'weight' must be > 0")
        frame["weight"] = w
    else:
        frame["weight"] = 1.0
    return frame.drop(columns=[LINE]).reset_index(drop=True)


def _labels(frame: pd.DataFrame, path: Path, config: TaskConfig) -> None:
    mapping = config.label_map()
    raw = frame["label"].astype(str).str.strip()
    codes, distinct = pd.factorize(raw, use_na_sentinel=False)  # each label mapped once
    category = pd.Series(distinct).str.casefold().map(mapping).take(codes).set_axis(raw.index)

    def problem(i: int) -> str:
        vocab = ", ".join(sorted({v for vs in config.labels.values() for v in vs}))
        return unknown_label_text(raw.iloc[i], vocab)

    raise_first_bad(frame, path, category.isna(), problem)
    values = config.category_value()
    frame["label_raw"] = raw
    frame["category"] = category
    frame["value"] = category.map(values).astype(float)


def _check_judgments(src: _Source | None, config: TaskConfig, known: set[str]) -> pd.DataFrame:
    cols = [
        "query_id",
        "answer",
        "label_raw",
        "category",
        "value",
        "annotator",
        "sample",
        "equivalence_class",
    ]
    if src is None:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        empty["value"] = empty["value"].astype(float)
        empty["_file"] = pd.Series([], dtype=object)
        empty[LINE] = pd.Series([], dtype="int64")
        return empty
    frame, path = src.frame, src.path
    _require(src, ("query_id", "answer", "label"), "judgments")
    nonempty(frame, path, ("query_id", "answer", "label"))
    check_queries_known(frame, path, known)
    _labels(frame, path, config)
    for col in ("annotator", "sample", "equivalence_class"):
        if col not in frame.columns:
            frame[col] = ""
        frame[col] = frame[col].astype(str).str.strip()
    frame["_file"] = str(path)
    extra = [c for c in frame.columns if c not in cols and c not in ("label", "_file", LINE)]
    return frame[cols + extra + ["_file", LINE]]


def _prob(frame: pd.DataFrame, path: Path) -> pd.Series:
    p = numbers(frame, path, "prob", allow_empty=False)
    raise_first_bad(
        frame, path, (p <= 0) | (p > 1), lambda i: f"prob {p.iloc[i]!r} is outside (0, 1]"
    )
    return p


def _check_samples(src: _Source | None, known: set[str]) -> pd.DataFrame:
    cols = ["sample", "system", "query_id", "answer", "prob", "draw", "stratum"]
    if src is None:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        empty["prob"] = empty["prob"].astype(float)
        empty[LINE] = pd.Series([], dtype="int64")
        return empty
    frame, path = src.frame, src.path
    _require(src, ("sample", "system", "query_id", "answer", "prob"), "samples")
    nonempty(frame, path, ("sample", "system", "query_id", "answer"))
    check_queries_known(frame, path, known)
    frame["prob"] = _prob(frame, path)
    if "draw" not in frame.columns:
        frame["draw"] = ""
    if "stratum" not in frame.columns:
        frame["stratum"] = ""
    frame["draw"] = frame["draw"].astype(str).str.strip()
    frame["stratum"] = frame["stratum"].astype(str).str.strip()
    extra = [c for c in frame.columns if c not in cols and c != LINE]
    return frame[[*cols, *extra, LINE]]


def _check_samples_against_outputs(
    samples: pd.DataFrame, outputs: pd.DataFrame, path: Path | None
) -> None:
    if samples.empty or path is None:
        return
    out_codes, systems = system_codes(outputs["system"])
    drawn_codes = systems.get_indexer(samples["system"])
    raise_first_bad(
        samples,
        path,
        drawn_codes < 0,
        lambda i: f"system {samples['system'].iloc[i]!r} has no outputs",
    )
    # (system, fact) pairs as integers, over the outputs of the drawn facts only
    fact = outputs["fact"].to_numpy(np.int64)
    drawn_facts = samples["fact"].to_numpy(np.int64)
    width = int(max(fact.max(initial=0), drawn_facts.max(initial=0))) + 1
    near = np.isin(fact, np.unique(drawn_facts))
    pairs = out_codes[near].astype(np.int64) * width + fact[near]
    missing = ~np.isin(drawn_codes.astype(np.int64) * width + drawn_facts, pairs)
    raise_first_bad(
        samples,
        path,
        missing,
        lambda i: (
            f"system {samples['system'].iloc[i]!r} never output the drawn answer "
            f"{samples['answer_raw'].iloc[i]!r} for query {samples['query_id'].iloc[i]!r}"
        ),
    )
    # a draw's prob must be the same every time the same (sample, system, fact) is drawn
    spread = samples.groupby(["sample", "system", "fact"], observed=True)["prob"].agg(
        ["min", "max"]
    )
    bad = ~np.isclose(spread["min"], spread["max"], rtol=1e-9, atol=0)
    if bad.any():
        key = spread.index[bad.nonzero()[0][0]]
        rows = samples[
            (samples["sample"] == key[0])
            & (samples["system"] == key[1])
            & (samples["fact"] == key[2])
        ]
        raise BundleError(
            path,
            int(rows[LINE].iloc[-1]),
            f"sample {key[0]!r} gives two different prob values for the same answer of system {key[1]!r}",
        )


def _check_exhaustive(
    usrc: _Source | None, esrc: _Source | None, known: set[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    units = pd.DataFrame({"unit": pd.Series([], dtype=object), "prob": pd.Series([], dtype=float)})
    exhaustive = pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in ("unit", "query_id", "answer")}
    )
    exhaustive[LINE] = pd.Series([], dtype="int64")
    if usrc is not None:
        frame, upath = usrc.frame, usrc.path
        _require(usrc, ("unit",), "exhaustive_units")
        nonempty(frame, upath, ("unit",))
        unique_values(frame, upath, "unit")
        # an all-empty prob column means uniform units, as `sample --units-from` writes it
        uniform = "prob" not in frame.columns or (frame["prob"].astype(str).str.strip() == "").all()
        frame["prob"] = np.nan if uniform else _prob(frame, upath)
        extra = [c for c in frame.columns if c not in ("unit", "prob", LINE)]
        units = frame[["unit", "prob", *extra]].reset_index(drop=True)
    if esrc is not None:
        epath = esrc.path
        if usrc is None:
            raise BundleError(
                epath,
                None,
                "exhaustive.tsv needs exhaustive_units.tsv (the units annotated, including empty ones)",
            )
        frame = esrc.frame
        _require(esrc, ("unit", "query_id", "answer"), "exhaustive")
        nonempty(frame, epath, ("unit", "query_id", "answer"))
        check_queries_known(frame, epath, known)
        raise_first_bad(
            frame,
            epath,
            ~frame["unit"].isin(set(units["unit"])),
            lambda i: f"unit {frame['unit'].iloc[i]!r} is not in exhaustive_units",
        )
        extra = [c for c in frame.columns if c not in ("unit", "query_id", "answer", LINE)]
        exhaustive = frame[["unit", "query_id", "answer", *extra, LINE]]
    return units, exhaustive


def _dedupe_truth(truth: pd.DataFrame, path: Path) -> pd.DataFrame:
    spread = truth.groupby("fact", observed=True)["value"].agg(["min", "max"])
    bad = spread["min"] != spread["max"]
    if bad.any():
        fact = spread.index[bad.to_numpy().nonzero()[0][0]]
        rows = truth[truth["fact"] == fact]
        raise BundleError(
            path,
            int(rows[LINE].iloc[-1]),
            f"answer {rows['answer_raw'].iloc[-1]!r} has two truth labels",
        )
    extra = ["equivalence_class"] if "equivalence_class" in truth.columns else []
    out = truth.drop_duplicates("fact")[["query_id", "answer", "fact", "value", *extra]]
    return out.reset_index(drop=True)


def _check_truth(src: _Source | None, config: TaskConfig, known: set[str]) -> pd.DataFrame | None:
    if src is None:
        return None
    frame, path = src.frame, src.path
    _require(src, ("query_id", "answer", "label"), "truth")
    nonempty(frame, path, ("query_id", "answer", "label"))
    check_queries_known(frame, path, known)
    _labels(frame, path, config)
    raise_first_bad(
        frame, path, frame["value"].isna(), "truth labels must be correct or wrong, not ignored"
    )
    extra = ["equivalence_class"] if "equivalence_class" in frame.columns else []
    return frame[["query_id", "answer", "value", *extra, LINE]]
