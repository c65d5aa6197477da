"""The official estimator: TAC Cold Start's closed-world census of the assessed pool, as an
:class:`~receval.estimators.base.Estimator` (the counting is :mod:`receval.official.scores`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from receval.estimators.base import LEADERBOARD_COLUMNS, Estimator, ScoringOutput
from receval.run_record import OfficialBlock, OptionsBlock, RecordParts


class OfficialEstimator(Estimator):
    """Census of the assessed responses: no sampling, no interval."""

    name: ClassVar[str] = "official"
    kind: ClassVar[str] = "census"
    equation: ClassVar[str] = (
        "TAC-KBP Cold Start CS-Score SF-ALL (micro) / trec_eval set_P, set_recall (macro): "
        "precision = correct / assessed responses, recall = correct / correct in the pool"
    )
    summary: ClassVar[str] = (
        "closed-world census of the assessed pool: pooled recall, no sampling uncertainty"
    )
    sample_based: ClassVar[bool] = False
    options: ClassVar[tuple[str, ...]] = ("unjudged", "average", "cutoff")

    def score(self, task: Any, options: Any, engine: Any = None) -> ScoringOutput:
        # lazy: the registry imports every estimator class for the CLI's help, and the census's
        # backends (engine, SQL, coded) are needed only when the census runs
        from receval.official.rules import OfficialPolicy
        from receval.official.scores import describe_official, official_leaderboard

        average = official_average(task, options)
        policy = OfficialPolicy(unassessed=options.unjudged)
        board = official_leaderboard(
            task,
            policy,
            average=average,
            cutoff=options.cutoff,
            rank_by=options.rank_by,
            engine=engine,
        )
        described = describe_official(task, policy, average=average, cutoff=options.cutoff)
        board["interval"] = (
            "none: census of the assessed pool (closed-world), no sampling uncertainty"
        )
        board["note"] = (
            described
            + "; recall is pooled (closed-world) recall against the assessed pool; "
            + board["note"].fillna("").astype(str)
        ).str.rstrip("; ")
        if average == "macro":
            board["estimator"] = "official (macro)"
        board = board[[*LEADERBOARD_COLUMNS, "estimator", "interval", "note"]]
        return ScoringOutput(
            options=options,
            leaderboard=board,
            pool=_pool_size(task),
            conflicts=task.merged.conflicts,
            truth_check=None,
            warnings=[],
            run=None,
            replicates=None,
            record=RecordParts(
                options=OptionsBlock.of(options),
                official=OfficialBlock(
                    average=average,
                    unjudged=policy.resolved_unassessed(task),
                    cutoff=options.cutoff,
                    description=described,
                ),
            ),
        )


def official_average(task: Any, options: Any) -> str:
    """The averaging rule of the official census: ``options.average`` when given, else
    ``options.target`` when it asks for macro, else the bundle's ``[official] average``
    (``import trec`` writes macro, trec_eval's rule), else micro (TAC's CS-Score)."""
    if options.average is not None:
        return options.average
    if options.target != "micro":
        return options.target
    return getattr(task.config, "average", None) or options.target


def _pool_size(task: Any) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "quantity": "pool_size",
                "estimate": int(task.pool_size),
                "lower": np.nan,
                "upper": np.nan,
                "kind": "count",
                "interval": "",
                "description": "distinct facts output by some system",
                "note": "",
            }
        ]
    )
