"""A ratio between two engines is published only where their rounds tell them apart."""

import pytest

from edge_translator.bench.benchreport import BenchResult, render_markdown
from edge_translator.bench.spread import Spread, apart, range_text, ratio_text


def test_a_spread_is_the_lowest_the_median_and_the_highest_round():
    assert Spread.of([3, 1, 2]) == Spread(1.0, 2.0, 3.0)
    assert Spread.of([5]) == Spread(5.0, 5.0, 5.0)
    assert Spread.of(iter([1, 2, 3, 4])).median == 2.5
    assert Spread.from_list(Spread.of([1.04, 2.26, 3]).as_list()) == Spread(1.0, 2.3, 3.0)
    assert Spread.from_list(None) is None and Spread.from_list([]) is None
    with pytest.raises(ValueError, match="at least one round"):
        Spread.of([])


@pytest.mark.parametrize("a, b, told_apart", [
    ([120, 125, 130], [100, 105, 110], True),    # every round of a above every round of b
    ([100, 105, 110], [120, 125, 130], True),    # and the other way round
    ([120, 125, 130], [110, 115, 121], False),   # one round of b above a's lowest
    ([121.7, 150, 185], [140, 160, 170], False),  # one side's range holds the other's
    ([100, 100, 100], [100, 100, 100], False),   # equal
    ([110, 110, 110], [100, 105, 110], False),   # touching is crossing
])
def test_ranges_that_cross_give_no_ratio_of_their_own(a, b, told_apart):
    sa, sb = Spread.of(a), Spread.of(b)
    assert apart(sa, sb) == apart(sb, sa) == told_apart
    text = ratio_text(sa, sb)
    ratio = f"{sa.median / sb.median:.2f}×"
    assert text == (ratio if told_apart else f"ranges cross ({ratio} of the medians)")


def test_a_missing_or_zero_side_is_not_a_ratio():
    s = Spread.of([1, 2])
    assert ratio_text(None, s) == ratio_text(s, None) == ratio_text(s, Spread.of([0])) == "n/a"
    assert range_text(Spread.of([121.7, 185])) == "121.7–185" and range_text(None) == ""


def _result(ours: list[float], ct2: list[float]) -> BenchResult:
    from edge_translator.bench.bench import BenchOptions
    from dataclasses import asdict

    o = asdict(BenchOptions(batch_sizes=(1,)))
    b1 = {"ours-int8r": Spread.of(ours), "ct2-int8": Spread.of(ct2)}
    return BenchResult(options=o, batch1_tok_s={k: s.median for k, s in b1.items()},
                       batch1_spread={k: s.as_list() for k, s in b1.items()},
                       batched_tok_s={k: {"1": s.median} for k, s in b1.items()},
                       batched_spread={k: {"1": s.as_list()} for k, s in b1.items()})


def test_the_report_gives_the_ratio_only_where_the_ranges_are_apart():
    report = render_markdown(_result([300, 310, 320], [100, 110, 120]), "plot.png")
    row = next(line for line in report.splitlines() if line.startswith("| ours-int8r |"))
    assert "| 310.0 | 300–320 | 2.82× |" in row
    assert "| 1 | 310.0 (2.82×) | 110.0 |" in report and "ranges cross" not in report
    assert "| ct2-int8 | 110.0 | 100–120 | 1.00× |" in report  # the peer's own row
    crossing = render_markdown(_result([110, 125, 140], [100, 110, 130]), "plot.png")
    row = next(line for line in crossing.splitlines() if line.startswith("| ours-int8r |"))
    assert "| 125.0 | 110–140 | ranges cross (1.14× of the medians) |" in row
    assert "| 1 | 125.0 (ranges cross (1.14× of the medians)) |" in crossing


def test_a_report_from_before_the_ranges_were_kept_still_gives_its_ratios():
    result = _result([300, 310, 320], [100, 110, 120])
    result.batch1_spread, result.batched_spread = {}, {}
    report = render_markdown(result, "plot.png")
    assert "| 310.0 |  | 2.82× |" in report and "| 1 | 310.0 (2.82×) | 110.0 |" in report
