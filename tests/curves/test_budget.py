"""curve_budget: the label-free plan sizes behind `receval curve budget --json`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from receval.curves.base import Labels
from receval.curves.budget import NON_ADAPTIVE_METHODS, curve_budget
from receval.curves.paula import Paula

PAPER_N = [35_615, 356_150, 3_561_500, 35_615_000]
TABLE = {
    # method: (queries, annotations) per size, AdaStrat Tables 1-2 / PAULA §5.2
    "paula": ([78, 156, 234, 312], [11_292, 19_092, 26_892, 34_692]),
    "random": ([0, 0, 0, 0], [24_745, 84_369, 284_834, 954_359]),
    "logstrat": ([78, 156, 234, 312], [18_287, 35_631, 53_937, 72_867]),
    # StratBand: PAULA's strata (the last runs to N), Δ labels each: at most PAULA's count.
    "stratband": ([78, 156, 234, 312], [11_292, 19_092, 26_892, 34_692]),
    # TailBand: StratBand's labels split between strata up to N/10 and a uniform sample (a
    # rank drawn by both is labelled once; the uniform part is 5 % above its floor); queries:
    # strata ends and the grid ranks bounded.
    "tailband": ([235, 312, 391, 468], [11_279, 19_057, 26_884, 34_688]),
}


@pytest.mark.parametrize("method", NON_ADAPTIVE_METHODS)
@pytest.mark.parametrize("index", range(4))
def test_acceptance_numbers(method: str, index: int) -> None:
    size = PAPER_N[index]
    got = curve_budget(method, size)
    queries, annotations = TABLE[method][0][index], TABLE[method][1][index]
    assert got["method"] == method and got["size"] == size
    assert got["queries"] == queries
    if method == "logstrat":  # defaults use β = 1.05; the table used β = γ
        assert abs(got["annotations"] - annotations) <= 0.02 * annotations
        assert curve_budget(method, size, beta=None)["annotations"] == annotations
    else:
        assert got["annotations"] == annotations


def test_output_is_json_ready_and_parameters_pass_through() -> None:
    got = curve_budget(
        "LogStrat", 1_000_000, epsilon=0.05, window=50, delta=0.1, beta=1.1, pmin=0.3
    )
    assert json.loads(json.dumps(got)) == got
    assert (got["epsilon"], got["window"], got["delta"], got["beta"], got["pmin"]) == (
        0.05,
        50,
        0.1,
        1.1,
        0.3,
    )
    assert got["r_tilde"] == 1_040  # ⌈(Δ+2)/ε⌉
    assert curve_budget("paula", 1_000_000, r_tilde=5_000)["r_tilde"] == 5_000


def test_paula_budget_equals_the_size_of_its_plans() -> None:
    for size in [2_500, 40_000, 1_234_567]:
        method = Paula()
        head = method.plan(size, Labels.empty())
        rest = method.plan(size, Labels(head, np.ones(head.size)))
        assert head.size + rest.size == curve_budget("paula", size)["annotations"]


def test_stratband_budget_equals_its_plan_and_never_exceeds_paula() -> None:
    from receval.curves.stratband import StratBand

    for size in [2_500, 40_000, 1_234_567]:
        method = StratBand()
        head = method.plan(size, Labels.empty())
        rest = method.plan(size, Labels(head, np.ones(head.size)))
        got = curve_budget("stratband", size)["annotations"]
        assert head.size + rest.size == got <= curve_budget("paula", size)["annotations"]


def test_adastrat_budget_is_a_worst_case_bound() -> None:
    got = curve_budget("adastrat", 35_615)
    assert got["kind"] == "upper bound" and got["annotations"] >= 14_612  # Table 1's run
    assert json.loads(json.dumps(got)) == got


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        curve_budget("magic", 1_000)
    with pytest.raises(ValueError, match="size"):
        curve_budget("paula", 0)
    with pytest.raises(ValueError, match="epsilon"):
        curve_budget("paula", 1_000, epsilon=1.5)
    with pytest.raises(ValueError, match="r_tilde"):
        curve_budget("paula", 1_000, r_tilde=10)
