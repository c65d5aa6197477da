"""The leaderboard: ranks, rank intervals, significance tiers, best run per team, anonymised view.

Ranks and their intervals come from the shared bootstrap replicates (one rank vector per
replicate; the interval is the replicates' rank quantiles).  **Tiers** come from paired bootstrap
tests: for every pair of systems the two-sided p-value of "equal metric" is
2·min(P*(d ≤ 0), P*(d ≥ 0)) over the replicate differences d (the percentile-interval test; the
replicates are paired because every system uses the same resampling counts), corrected for the
m(m−1)/2 comparisons with Holm's step-down method (or Benjamini–Hochberg) from statsmodels.
Walking down the ranking, a system opens a new tier when it is significantly worse than the first
system of the current tier; otherwise it joins that tier.  So no system in a tier is
distinguishable from the tier's leader at the chosen level.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

CORRECTIONS = {"holm": "holm", "bh": "fdr_bh"}


def replicate_ranks(values: np.ndarray) -> np.ndarray:
    """Competition ranks (1 = best, higher value better) per row of (B × m); NaN stays NaN."""
    v = np.where(np.isnan(values), -np.inf, values)
    ranks = 1.0 + (v[:, None, :] > v[:, :, None]).sum(axis=2)
    return np.where(np.isnan(values), np.nan, ranks)


def rank_intervals(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """(rank_lo, rank_hi) per system: the replicates' rank quantiles at (1 ± level)/2."""
    ranks = replicate_ranks(replicates)
    alpha = (1 - level) / 2
    with np.errstate(invalid="ignore"):
        lo = np.floor(np.nanquantile(ranks, alpha, axis=0))
        hi = np.ceil(np.nanquantile(ranks, 1 - alpha, axis=0))
    return lo, hi


def paired_pvalues(replicates: np.ndarray) -> np.ndarray:
    """Two-sided paired bootstrap p-values (m × m) of "system i and j have the same metric"."""
    reps = np.asarray(replicates, float)
    d = reps[:, :, None] - reps[:, None, :]  # (B, m, m)
    valid = ~np.isnan(d)
    n = valid.sum(axis=0)
    le = np.where(valid, d <= 0, False).sum(axis=0)
    ge = np.where(valid, d >= 0, False).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2 * np.minimum(le, ge) / n)
    p[n == 0] = np.nan
    np.fill_diagonal(p, 1.0)
    return p


def significance_tiers(
    point: np.ndarray, replicates: np.ndarray, *, level: float = 0.95, correction: str = "holm"
) -> np.ndarray:
    """Tier number per system (1 = top; 0 where the metric is NaN); see the module docstring."""
    point = np.asarray(point, float)
    m = point.size
    tiers = np.zeros(m, int)
    ok = np.flatnonzero(~np.isnan(point))
    if ok.size == 0:
        return tiers
    p = paired_pvalues(replicates)
    iu = np.triu_indices(m, 1)
    flat = p[iu]
    valid = ~np.isnan(flat)
    adjusted = np.ones_like(flat)
    if valid.any():
        adjusted[valid] = multipletests(
            flat[valid], alpha=1 - level, method=CORRECTIONS[correction]
        )[1]
    adj = np.ones((m, m))
    adj[iu] = adjusted
    adj[(iu[1], iu[0])] = adjusted
    order = ok[np.argsort(-point[ok], kind="stable")]
    tier = 1
    leader = order[0]
    for i in order:
        if i != leader and adj[leader, i] < 1 - level and point[i] < point[leader]:
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
