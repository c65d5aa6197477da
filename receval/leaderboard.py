"""The leaderboard: ranks, simultaneous rank confidence sets, significance tiers, best run per team.

**Pairwise comparisons** (:func:`stepdown_comparisons`).  Every statement the leaderboard makes
about the order of two systems comes from one family of paired bootstrap tests of
"system i and j have the same metric", over all S(S − 1)/2 pairs of the S systems whose metric can
be estimated.  The statistic of a pair is T_ij = |d̂_ij| / ŝe_ij (d̂ the difference of point
estimates, ŝe its bootstrap standard deviation; the replicates are paired because every system
uses the same resampling counts).  The null distribution is that of the *maximum* studentised
deviation max_(i,j) |d*_ij − d̂_ij| / ŝe_ij over the replicates (the max-t or simultaneous
bootstrap test), applied step-down: Romano & Wolf (2005), "Exact and approximate stepdown methods
for multiple hypothesis testing", JASA 100, algorithm 4.1 with the bootstrap of §4.  Adjusted
p-values are (1 + #{b : max* ≥ T}) / (B + 1), so they are never 0: with B replicates the smallest
attainable p-value is 1/(B + 1), and no pair can be declared different unless B ≥ 1/α − 1
(:func:`minimum_replicates`).  The family-wise error — the chance that *any* pair of equal
systems is declared different — is at most α asymptotically (Romano & Wolf 2005, thm. 3 and
§4.2), whatever the number of systems and whatever the dependence between them; the
``bench/validity.py`` null worlds measure it.

**Rank confidence sets** (:func:`rank_confidence_sets`), from the same comparisons: Mogstad,
Romano, Shaikh & Wilhelm (2024), "Inference for ranks with applications to mobility across
neighbourhoods and academic achievement across countries", *Review of Economic Studies*, §3.2:
lower rank = 1 + #systems significantly better, upper rank = S − #systems significantly worse.
Because all pairwise statements hold together with probability ≥ 1 − α, the sets cover every
system's true rank *simultaneously* at level 1 − α.  The point rank is 1 + #systems with a
strictly larger estimate (ties share the better rank).

**Tiers** (:func:`significance_tiers`): walking down the ranking, a system opens a new tier when
it is significantly worse than the first system of the current tier; otherwise it joins that
tier.  In a world where every system is equally good the leaderboard has more than one tier only
when the family makes a false statement, so with probability ≤ α.  ``correction="holm"`` or
``"bh"`` keeps the former procedure (marginal paired percentile tests, now with never-zero
p-values, corrected by Holm or Benjamini–Hochberg); BH controls the false discovery rate, not
the family-wise error.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

CORRECTIONS = {"holm": "holm", "bh": "fdr_bh"}
#: tier procedures: the default max-t step-down bootstrap and the two marginal corrections
TIER_PROCEDURES = ("stepdown", "holm", "bh")


def replicate_ranks(values: np.ndarray) -> np.ndarray:
    """Competition ranks (1 = best, higher value better) per row of (B × m); NaN stays NaN.

    A system's rank is 1 + the number of systems with a strictly larger value.
    """
    v = np.where(np.isnan(values), -np.inf, values)
    ranks = 1.0 + (v[:, None, :] > v[:, :, None]).sum(axis=2)
    return np.where(np.isnan(values), np.nan, ranks)


def rank_intervals(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Marginal (rank_lo, rank_hi) per system: the replicates' rank quantiles at (1 ± level)/2.

    Kept for diagnostics only: these are *not* confidence sets for the rank (they undercover at
    ties, see the module docstring); the leaderboard uses :func:`rank_confidence_sets`.
    """
    ranks = replicate_ranks(replicates)
    alpha = (1 - level) / 2
    with np.errstate(invalid="ignore"):
        lo = np.floor(np.nanquantile(ranks, alpha, axis=0))
        hi = np.ceil(np.nanquantile(ranks, 1 - alpha, axis=0))
    return lo, hi


def minimum_replicates(alpha: float) -> int:
    """The smallest B at which a (B + 1)-denominator p-value can fall to α: ⌈1/α⌉ − 1."""
    return max(1, math.ceil(1.0 / alpha - 1e-12) - 1)


def paired_pvalues(replicates: np.ndarray) -> np.ndarray:
    """Marginal two-sided paired bootstrap p-values (m × m) of "system i and j have the same metric".

    p = min(1, 2 (1 + min(#{d* ≤ 0}, #{d* ≥ 0})) / (B + 1)) over the replicate differences d*
    (the percentile-interval test with the usual +1 correction, so p is never 0).
    """
    reps = np.asarray(replicates, float)
    d = reps[:, :, None] - reps[:, None, :]  # (B, m, m)
    valid = ~np.isnan(d)
    n = valid.sum(axis=0)
    le = np.where(valid, d <= 0, False).sum(axis=0)
    ge = np.where(valid, d >= 0, False).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2 * (1 + np.minimum(le, ge)) / (n + 1))
    p[n == 0] = np.nan
    np.fill_diagonal(p, 1.0)
    return p


@dataclass(frozen=True)
class Comparisons:
    """The outcome of the pairwise tests among the systems with an estimate.

    Attributes
    ----------
    better : (m, m) bool, ``better[i, j]``: system i is significantly better than system j.
    pvalues : (m, m) adjusted p-values (NaN where a system has no estimate; 1 on the diagonal).
    procedure : ``stepdown``, ``holm`` or ``bh``.
    alpha : the family-wise (or, for ``bh``, false-discovery) error rate.
    B : replicates used; ``dropped``: replicates left out because some system's value was NaN.
    """

    better: np.ndarray
    pvalues: np.ndarray
    procedure: str
    alpha: float
    B: int
    dropped: int = 0

    def describe(self) -> str:
        """One sentence for run.json and the report."""
        if self.procedure == "stepdown":
            return (
                "max-t step-down paired bootstrap tests (Romano & Wolf 2005) over all pairs, "
                f"family-wise error <= {self.alpha:g}; p-values (1 + count)/(B + 1), never 0; "
                f"B = {self.B} (minimum {minimum_replicates(self.alpha)})"
            )
        name = "Holm" if self.procedure == "holm" else "Benjamini-Hochberg (false discovery rate)"
        return f"marginal paired bootstrap tests, {name} correction at {self.alpha:g}, B = {self.B}"


def _stepdown_pvalues(d_hat: np.ndarray, d_star: np.ndarray) -> np.ndarray:
    """Romano–Wolf adjusted p-values of the pairs (P,) from point (P,) and replicate (B, P) diffs."""
    B = d_star.shape[0]
    se = d_star.std(axis=0, ddof=1) if B > 1 else np.zeros_like(d_hat)
    with np.errstate(invalid="ignore", divide="ignore"):
        # se = 0: the difference does not vary over the replicates (e.g. two censuses): it is
        # exact, so "different" is certain when d̂ ≠ 0 and impossible when d̂ = 0
        t = np.where(se > 0, np.abs(d_hat) / se, np.where(d_hat != 0, np.inf, 0.0))
        dev = np.where(se > 0, np.abs(d_star - d_hat) / np.where(se > 0, se, 1.0), 0.0)
    order = np.argsort(-t, kind="stable")
    # max over the pairs not yet rejected when pair order[k] is tested: a reverse running max
    tail_max = np.maximum.accumulate(dev[:, order[::-1]], axis=1)[:, ::-1]  # (B, P)
    exceed = (tail_max >= t[order][None, :]).sum(axis=0)
    p_sorted = (1.0 + exceed) / (B + 1.0)
    p_sorted = np.where(np.isinf(t[order]), 1.0 / (B + 1.0), p_sorted)
    p_sorted = np.where(t[order] == 0, 1.0, p_sorted)
    p_sorted = np.maximum.accumulate(p_sorted)  # step-down monotonicity
    p = np.empty_like(p_sorted)
    p[order] = p_sorted
    return p


def stepdown_comparisons(
    point: np.ndarray, replicates: np.ndarray, *, alpha: float = 0.05, procedure: str = "stepdown"
) -> Comparisons:
    """All pairwise comparisons with family-wise error ≤ α (see the module docstring).

    Parameters
    ----------
    point : (m,) point estimates (NaN: the system takes no part).
    replicates : (B, m) bootstrap replicates sharing resampling counts across systems.
    alpha : error rate of the family.
    procedure : ``stepdown`` (max-t, Romano–Wolf), ``holm`` or ``bh`` (marginal tests).

    Returns
    -------
    Comparisons
    """
    if procedure not in TIER_PROCEDURES:
        raise ValueError(
            f"unknown tier procedure {procedure!r} (known: {', '.join(TIER_PROCEDURES)})"
        )
    point = np.asarray(point, float)
    reps = np.asarray(replicates, float)
    m = point.size
    ok = np.flatnonzero(~np.isnan(point))
    better = np.zeros((m, m), bool)
    pvalues = np.full((m, m), np.nan)
    pvalues[ok, ok] = 1.0
    if ok.size < 2:
        return Comparisons(better, pvalues, procedure, alpha, reps.shape[0])
    sub = reps[:, ok]
    keep = ~np.isnan(sub).any(axis=1)
    sub = sub[keep]
    iu = np.triu_indices(ok.size, 1)
    d_hat = point[ok][iu[0]] - point[ok][iu[1]]
    if procedure == "stepdown":
        p_pairs = _stepdown_pvalues(d_hat, sub[:, iu[0]] - sub[:, iu[1]])
    else:
        from statsmodels.stats.multitest import multipletests

        raw = paired_pvalues(sub)[iu]
        p_pairs = multipletests(raw, alpha=alpha, method=CORRECTIONS[procedure])[1]
    p_sub = np.ones((ok.size, ok.size))
    p_sub[iu] = p_pairs
    p_sub[(iu[1], iu[0])] = p_pairs
    pvalues[np.ix_(ok, ok)] = p_sub
    diff = point[ok][:, None] - point[ok][None, :]
    better[np.ix_(ok, ok)] = (p_sub <= alpha) & (diff > 0)
    return Comparisons(better, pvalues, procedure, alpha, reps.shape[0], int((~keep).sum()))


def rank_confidence_sets(
    comparisons: Comparisons, point: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Simultaneous rank confidence sets [lo, hi] per system (Mogstad et al. 2024, §3.2).

    lo = 1 + #systems significantly better, hi = S − #systems significantly worse, S the systems
    with an estimate; NaN for a system without one.  Simultaneous coverage ≥ 1 − α whenever the
    comparisons hold family-wise error α (two-sided max-t over all pairs covers both directions).
    """
    point = np.asarray(point, float)
    ok = ~np.isnan(point)
    S = int(ok.sum())
    lo = 1.0 + comparisons.better.sum(axis=0)
    hi = S - comparisons.better.sum(axis=1).astype(float)
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def significance_tiers(
    point: np.ndarray,
    replicates: np.ndarray,
    *,
    level: float = 0.95,
    correction: str = "stepdown",
    comparisons: Comparisons | None = None,
) -> np.ndarray:
    """Tier number per system (1 = top; 0 where the metric is NaN); see the module docstring."""
    point = np.asarray(point, float)
    tiers = np.zeros(point.size, int)
    ok = np.flatnonzero(~np.isnan(point))
    if ok.size == 0:
        return tiers
    if comparisons is None:
        comparisons = stepdown_comparisons(point, replicates, alpha=1 - level, procedure=correction)
    order = ok[np.argsort(-point[ok], kind="stable")]
    tier = 1
    leader = order[0]
    for i in order:  # S systems, not replicates
        if i != leader and comparisons.better[leader, i]:
            tier += 1
            leader = i
        tiers[i] = tier
    return tiers


def best_per_team(board: pd.DataFrame, key: str = "rank") -> pd.Series:
    """Whether each row is its team's best-ranked run (ties: the first in board order)."""
    ranked = board.assign(_r=board[key].fillna(np.inf), _o=np.arange(len(board)))
    best = ranked.sort_values(["_r", "_o"]).drop_duplicates("team")["_o"]
    return pd.Series(np.isin(np.arange(len(board)), best.to_numpy()), index=board.index)


def pseudonym(name: str, key: str, prefix: str) -> str:
    """A stable pseudonym: ``prefix`` + 6 hex digits of SHA-256(key, name).

    The same key gives the same pseudonyms, run after run.  The key must be secret: anyone who
    knows it (or can guess it, e.g. a task name) can hash the real names and confirm who is who.
    ``receval score --anonymise`` therefore uses a random key kept outside the published output
    (:func:`anonymisation_key`).
    """
    digest = hashlib.sha256(f"{key}\x1f{name}".encode()).hexdigest()[:6]
    return f"{prefix}{digest}"


def anonymise(board: pd.DataFrame, key: str) -> pd.DataFrame:
    """The leaderboard with team names replaced by stable pseudonyms and systems by team-run ids.

    Teams become ``team-<6 hex>`` (:func:`pseudonym` of the team name); a team's systems become
    ``<team pseudonym>-run<N>``, numbered in the order of their own keyed hashes, so neither the
    numbering nor the pseudonyms reveal the real names to a reader without ``key``.
    """
    if not key:
        raise ValueError("anonymise needs a non-empty secret key")
    out = board.copy()
    teams = {t: pseudonym(t, key, "team-") for t in sorted(out["team"].unique())}
    run_no: dict[str, int] = {}
    systems = {}
    for system, team in sorted(
        zip(out["system"], out["team"], strict=True), key=lambda st: pseudonym(st[0], key, "")
    ):
        run_no[team] = run_no.get(team, 0) + 1
        systems[system] = f"{teams[team]}-run{run_no[team]}"
    out["team"] = out["team"].map(teams)
    out["system"] = out["system"].map(systems)
    return out


#: Where ``receval score TASK --anonymise`` keeps its random key by default (inside the task
#: directory, which the organiser keeps; never in the published output directory).
DEFAULT_KEY_FILE = Path(".receval") / "anonymise.key"

#: Random bytes of a new anonymisation key (256 bits: not guessable, not brute-forceable).
KEY_BYTES = 32


def _ignore_in_git(folder: Path) -> None:
    """Keep receval's own folder (``.receval/``) out of version control, as pytest does for
    its cache: a task directory is often a git repository, and the key must not be committed."""
    if folder.name != DEFAULT_KEY_FILE.parent.name:
        return
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by receval: the anonymisation key stays private\n*\n")


def anonymisation_key(path: Path) -> tuple[str, bool]:
    """The secret key of the pseudonyms kept in ``path``, created on first use: (key, created).

    A new key is 256 random bits from :mod:`secrets` (the operating system's CSPRNG, not a seeded
    generator: the key must not be reproducible from anything published), written as 64 hex
    digits readable by its owner only (mode 0600).  The file is created exclusively, never
    replacing an existing key; a new ``.receval/`` folder gets a ``.gitignore`` of everything.
    Reusing the file reproduces
    the same pseudonyms on later runs; deleting it gives new ones.

    Raises ``ValueError`` when the file exists but holds no key, ``OSError`` when it cannot be
    read or created.
    """
    path = Path(path)
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another run created it meanwhile: use that one
            fd = None
        if fd is not None:
            try:
                os.write(fd, (secrets.token_hex(KEY_BYTES) + "\n").encode("ascii"))
            except BaseException:
                os.close(fd)
                path.unlink(missing_ok=True)
                raise
            os.close(fd)
            created = True
            _ignore_in_git(path.parent)
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ValueError(f"{path}: the anonymisation key file is empty")
    return key, created
