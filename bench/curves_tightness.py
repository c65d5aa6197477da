"""Curve bands against the obvious baseline (H+CP) at equal labels: coverage and half-widths.

Run: ``PYTHONPATH=. python bench/curves_tightness.py [--seeds 200] [--big 200] [--quick]``

H+CP (:func:`hcp_band`) is the baseline of issue 22: the same exact head as PAULA/StratBand,
then M i.i.d. uniform draws over the tail (M = the other methods' tail labels, so it never
uses more labels), a two-sided Clopper–Pearson interval for the tail yield at each point of a
1.01-geometric grid of ranks at level δ/G (union bound over the G points), and the yield's
monotonicity (C(k) non-decreasing) between grid points.

For each list (real lists from ``../shared/data`` when present — ParaBank by NLL, the two PPDB
2.0 human samples by a proxy score, Chaganty et al.'s MS MARCO answers by word overlap with the
selected passages, the TAC Cold Start scorer fixtures' runs by confidence — and synthetic
falling, rising, flat, wave and low-prevalence lists, N = 10⁴ … 10⁸) and each seed, every method is run to
completion at the same label count; the study prints

* simultaneous coverage: the share of seeds whose band holds at every checked rank (every
  rank for N ≤ 10⁶; for larger N, on deterministic "balanced" lists, at every output step's
  first and last rank and 2·10⁵ log-spaced ranks), with its Monte Carlo SE;
* median half-width (upper − lower)/2 over seeds at k = 1 %, 10 %, 50 % and 100 % of N
  (0 inside the exact head).

Everything is measured in one run; the figures in the README come from this script.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from receval.curves.ranked import ArrayRankedList, LogisticShape, SimulatedRankedList
from receval.curves.stratband import StratBand
from receval.curves.tailband import TailBand, grid_points

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

FRACTIONS = (0.01, 0.1, 0.5, 1.0)


@dataclass(frozen=True)
class GridBand:
    """Bounds of H+CP: C⁻, C⁺ at the grid points; rank k gets [C⁻(g_i)/k, C⁺(g_{i+1})/k]."""

    head_yield: np.ndarray  # C(1..h)
    knots: np.ndarray  # h, g_1, …, g_G = N
    lo: np.ndarray
    hi: np.ndarray

    def at(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ranks = np.asarray(ranks, np.int64)
        head = self.knots[0]
        inside = ranks <= head
        below = np.clip(np.searchsorted(self.knots, ranks, side="right") - 1, 0, None)
        above = np.clip(np.searchsorted(self.knots, ranks, side="left"), 0, self.knots.size - 1)
        k = ranks.astype(np.float64)
        lower = self.lo[below] / k
        upper = self.hi[above] / k
        exact = self.head_yield[np.clip(ranks, 1, head) - 1] / np.maximum(k, 1.0)
        return np.where(inside, exact, lower), np.where(inside, exact, np.minimum(upper, 1.0))


def hcp_band(
    size: int, oracle, head: int, draws: int, delta: float, seed: int, ratio: float = 1.01
) -> tuple[GridBand, int]:
    """The H+CP baseline (module docstring); (band, distinct labels used)."""
    from scipy.stats import beta

    head_labels = oracle(np.arange(1, head + 1, dtype=np.int64))
    head_yield = np.cumsum(head_labels)
    tail = size - head
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4843]))
    ranks = np.sort(rng.integers(head + 1, size + 1, size=draws, dtype=np.int64))
    unique, inverse = np.unique(ranks, return_inverse=True)
    values = oracle(unique)[inverse]
    points = grid_points(head, size, ratio)
    if points.size == 0:  # the head is the whole list: exact
        c = float(head_yield[-1]) if head_yield.size else 0.0
        knots = np.array([head], np.int64)
        return GridBand(head_yield, knots, np.array([c]), np.array([c])), int(head)
    hits = np.concatenate([[0.0], np.cumsum(values)])[np.searchsorted(ranks, points, "right")]
    alpha = delta / points.size  # two-sided, α/2 in each tail
    with np.errstate(invalid="ignore"):
        q_lo = np.where(hits > 0, beta.ppf(alpha / 2, hits, draws - hits + 1), 0.0)
        q_hi = np.where(hits < draws, beta.ppf(1 - alpha / 2, hits + 1, draws - hits), 1.0)
    c_head = float(head_yield[-1])
    lo = np.maximum.accumulate(c_head + np.maximum(np.ceil(q_lo * tail - 1e-9), 0.0))
    cap = c_head + (points - head)
    hi = np.minimum.accumulate(np.minimum(c_head + np.floor(q_hi * tail + 1e-9), cap)[::-1])[::-1]
    knots = np.concatenate([[head], points])
    band = GridBand(
        head_yield, knots, np.concatenate([[c_head], lo]), np.concatenate([[c_head], hi])
    )
    return band, int(head + unique.size)


# ----------------------------------------------------------------------------- lists


@dataclass(frozen=True)
class RisingShape:
    """q(x) = low + (high − low)/(1 + exp(−(x − midpoint)/width)): precision rises with rank."""

    low: float
    high: float
    midpoint: float
    width: float

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64)
        w, a = self.width, self.midpoint
        soft = w * (np.logaddexp(0.0, (x - a) / w) - np.logaddexp(0.0, -a / w))
        return self.low * x + (self.high - self.low) * soft


@dataclass(frozen=True)
class WaveShape:
    """q(x) = centre + amplitude·sin(2πx/period): not monotone at any scale."""

    centre: float
    amplitude: float
    period: float

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64)
        turn = 2.0 * math.pi / self.period
        return self.centre * x + self.amplitude * (1.0 - np.cos(turn * x)) / turn


def synthetic(kind: str, size: int):
    """The synthetic density ``kind`` scaled to N."""
    n = float(size)
    return {
        "falling": LogisticShape(0.95, 0.35, n / 3, n / 10),
        "rising": RisingShape(0.3, 0.8, n / 2, n / 10),
        "flat": LogisticShape(0.5, 0.5, n / 2, n / 4),
        "wave": WaveShape(0.5, 0.35, n / 7),
        "low": LogisticShape(0.06, 0.005, n / 5, n / 10),
    }[kind]


def lists(big: bool) -> list[tuple[str, object, dict]]:
    """(name, ranked list, method parameters) for the study."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "curves"))
    import real_lists as real

    out: list[tuple[str, object, dict]] = []
    small = {"epsilon": 0.1, "window": 20}
    parabank = real.parabank_by_model_score()
    if parabank is not None:
        out.append(("ParaBank by NLL", ArrayRankedList(parabank), small))
    ppdb = real.ppdb_by_proxy_score()
    if ppdb is not None:
        out.append(("PPDB 2.0 by proxy", ArrayRankedList(ppdb), {}))
    for name, labels in (
        ("PPDB wiki by proxy", real.ppdb_wiki_by_proxy_score()),
        ("MS MARCO by overlap", (real.msmarco_by_overlap() or (None,))[0]),
        ("TAC fixtures by conf", real.tac_fixture_runs_by_confidence()),
    ):
        if labels is not None:
            out.append((name, ArrayRankedList(labels), small))
    for kind in ("falling", "rising", "flat", "wave", "low"):
        out.append((f"{kind} 1e4", SimulatedRankedList(10_000, synthetic(kind, 1e4), 7), small))
        out.append((f"{kind} 1e5", SimulatedRankedList(100_000, synthetic(kind, 1e5), 7), {}))
    out.append(("falling 1e6", SimulatedRankedList(10**6, synthetic("falling", 1e6), 7), {}))
    if big:
        for kind in ("low", "flat"):
            shape = synthetic(kind, 1e8)
            out.append((f"{kind} 1e8", SimulatedRankedList(10**8, shape, 7, "balanced"), {}))
    return out


# ----------------------------------------------------------------------------- study


def _check_ranks(size: int, steps: np.ndarray | None) -> np.ndarray:
    if size <= 10**6:
        return np.arange(1, size + 1, dtype=np.int64)
    spaced = np.unique(np.geomspace(1, size, 200_000).astype(np.int64))
    if steps is None:
        return spaced
    return np.unique(np.concatenate([spaced, steps, np.maximum(steps - 1, 1)]))


def study(name: str, ranked, params: dict, seeds: int, delta: float = 0.05) -> dict:
    """Coverage and median half-widths of TailBand, StratBand and H+CP on one list."""
    size = ranked.size
    ks = np.maximum((np.array(FRACTIONS) * size).astype(np.int64), 1)
    base = _check_ranks(size, None)
    truth_base = ranked.true_precision(base)
    truth_k = ranked.true_precision(ks)
    result: dict[str, dict] = {}
    for method in ("tailband", "stratband", "H+CP"):
        covered, widths, labels, seconds = 0, [], 0, 0.0
        for seed in range(seeds):
            start = time.perf_counter()
            if method == "H+CP":
                tb = TailBand(seed=seed, delta=delta, **params)
                band, labels = hcp_band(
                    size, ranked.labels, tb.head(size), tb.tail_labels(size), delta, seed
                )
                seconds += time.perf_counter() - start
                lo, hi = band.at(base)
                ok = np.all((truth_base >= lo - 1e-12) & (truth_base <= hi + 1e-12))
                lk, hk = band.at(ks)
            else:
                cls = TailBand if method == "tailband" else StratBand
                est = cls(seed=seed, delta=delta, **params).run(size, ranked.labels)
                seconds += time.perf_counter() - start
                labels = est.annotations
                check = base if size <= 10**6 else _check_ranks(size, est.ranks)
                truth = truth_base if size <= 10**6 else ranked.true_precision(check)
                _, lo, hi = est.at(check)
                ok = np.all((truth >= lo - 1e-12) & (truth <= hi + 1e-12))
                _, lk, hk = est.at(ks)
            covered += bool(ok)
            widths.append((hk - lk) / 2.0)
        share = covered / seeds
        result[method] = {
            "coverage": share,
            "se": math.sqrt(max(share * (1 - share), 1e-12) / seeds),
            "halfwidth": np.median(np.array(widths), axis=0),
            "labels": labels,
            "seconds": seconds / seeds,
        }
    result["truth"] = truth_k
    return result


def kinds(name: str, ranked, params: dict, seeds: int, delta: float = 0.05) -> dict[str, dict]:
    """For every method the CLI offers: the kinds it reports over seeds and, among the runs that
    claim a ``band`` or ``interval``, the share that holds at every rank past the exact prefix."""
    from receval.curves import make_method
    from receval.options import CURVE_METHODS

    size = ranked.size
    ranks = _check_ranks(size, None)
    truth = ranked.true_precision(ranks)
    out: dict[str, dict] = {}
    for method in CURVE_METHODS:
        seen: dict[str, int] = {}
        claimed = held = 0
        for seed in range(seeds):
            est = make_method(method, seed=seed, delta=delta, **params).run(size, ranked.labels)
            seen[est.kind] = seen.get(est.kind, 0) + 1
            if est.kind in ("band", "interval"):
                claimed += 1
                _, lo, hi = est.at(ranks)
                past = ranks > est.exact_prefix
                held += bool(
                    np.all((truth[past] >= lo[past] - 1e-12) & (truth[past] <= hi[past] + 1e-12))
                )
        out[method] = {"kinds": seen, "claimed": claimed, "held": held}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, reps=200, reps_name="seeds")
    parser.add_argument("--big", type=int, default=200, help="seeds for the N = 10⁸ lists")
    parser.add_argument("--quick", action="store_true", help="N ≤ 10⁶ only")
    parser.add_argument("--kind-seeds", type=int, default=40, help="seeds of the kinds table")
    args = harness.parse(parser, argv)
    tee, table, kind_rows = harness.Tee(), [], []
    start = time.perf_counter()
    print(
        "Simultaneous coverage (δ = 0.05) and median half-width at k = 1/10/50/100 % of N, "
        "equal labels"
    )
    header = f"{'list':<20} {'N':>11} {'method':<9} {'labels':>7} {'coverage':>14} "
    print(header + "  half-width at 1 % / 10 % / 50 % / 100 %       s/run")
    for name, ranked, params in lists(not args.quick):
        seeds = args.big if ranked.size > 10**6 else args.seeds
        res = study(name, ranked, params, seeds)
        for method in ("tailband", "stratband", "H+CP"):
            r = res[method]
            hw = " / ".join(f"{w:.4f}" for w in r["halfwidth"])
            table.append(
                {"list": name, "N": ranked.size, "method": method, "labels": r["labels"]}
                | {"coverage": r["coverage"], "se": r["se"], "seeds": seeds}
                | dict(
                    zip(("hw_1pc", "hw_10pc", "hw_50pc", "hw_100pc"), r["halfwidth"], strict=True)
                )
            )
            print(
                f"{name:<20} {ranked.size:>11,} {method:<9} {r['labels']:>7,} "
                f"{r['coverage']:>7.3f} ± {r['se']:.3f}  {hw}  {r['seconds']:.3f}",
                flush=True,
            )
        tb, hcp = res["tailband"]["halfwidth"], res["H+CP"]["halfwidth"]
        verdict = "≤ H+CP at all four k" if np.all(tb <= hcp + 1e-12) else "WIDER somewhere"
        ratios = " / ".join(
            f"{a / b:.3f}" if b > 0 else "  —  " for a, b in zip(tb, hcp, strict=True)
        )
        print(f"{'':<20} tailband {verdict}; ratio {ratios}", flush=True)
    if args.kind_seeds == 0:
        print(f"\n(total {time.perf_counter() - start:.0f} s)")
        _store(args, argv, tee, table, kind_rows)
        return
    print()
    print(
        f"Kinds of every CLI method ({args.kind_seeds} seeds each; claimed = runs reporting "
        "band/interval, held = of those, runs whose bounds hold at every rank)"
    )
    for name, ranked, params in lists(False):
        if ranked.size > 10**5:
            continue
        res = kinds(name, ranked, params, args.kind_seeds)
        for method, r in res.items():
            share = r["held"] / r["claimed"] if r["claimed"] else float("nan")
            ok = "ok" if not r["claimed"] or share >= 0.90 else "VIOLATION"
            seen = ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items()))
            kind_rows.append({"list": name, "method": method, "kinds": seen, "held": share})
            print(
                f"{name:<20} {method:<10} {seen:<32} claimed {r['claimed']:>3} "
                f"held {share:>6.3f}  {ok}",
                flush=True,
            )
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
    _store(args, argv, tee, table, kind_rows)


def _store(args, argv, tee, table: list[dict], kind_rows: list[dict]) -> None:
    figures = {"bands": table, "kinds": kind_rows}
    title = "lists N ≤ 10⁶" if args.quick else "every list"
    seeds = f"0 … {args.seeds - 1} per list (0 … {args.big - 1} at N = 10⁸)"
    harness.store(args, "curves_tightness", figures, argv, output=tee, title=title, seed=seeds)


if __name__ == "__main__":
    main()
