import pytest

from timely_spark.progress import (
    MAX_INT,
    Add,
    Product,
    ProductSummary,
    TupleSummary,
    advance,
    identity,
    less_equal,
)


def test_add_results_in_and_overflow():
    assert Add(2).results_in(5) == 7
    assert Add(1).results_in(MAX_INT) is None
    assert Add(1, limit=9).results_in(8) == 9 and Add(1, limit=9).results_in(9) is None
    with pytest.raises(ValueError, match="backwards"):
        Add(-1)


def test_add_followed_by_respects_limits():
    s = Add(1, limit=9).followed_by(Add(2))
    # t -> t+1 (<= 9) -> t+3: passes t <= 8
    assert s.results_in(8) == 11 and s.results_in(9) is None
    assert Add(5, limit=4).followed_by(Add(0)) is None  # can pass nothing
    assert Add(MAX_INT).followed_by(Add(1)) is None


def test_add_order():
    assert Add(1).less_equal(Add(2)) and not Add(2).less_equal(Add(1))
    # a bounded path passes fewer times, so it is not below an unbounded one
    assert not Add(1, limit=5).less_equal(Add(1)) and Add(1).less_equal(Add(1, limit=5))


def test_product_summary_acts_on_each_coordinate():
    s = ProductSummary(Add(0), Add(1))
    assert s.results_in(Product(3, 4)) == Product(3, 5)
    assert ProductSummary(Add(0), Add(1, limit=4)).results_in(Product(3, 4)) is None
    assert s.followed_by(ProductSummary(Add(1), Add(0))) == ProductSummary(Add(1), Add(1))
    assert ProductSummary(Add(1, limit=0), Add(0)).followed_by(ProductSummary(Add(0), Add(0))) is None
    a, b = ProductSummary(Add(0), Add(1)), ProductSummary(Add(1), Add(0))
    assert not a.less_equal(b) and not b.less_equal(a)
    assert s.advances() and not identity(Product(0, 0)).advances()


def test_nested_product_summary():
    s = advance(Product(Product(0, 0), 0), 2)
    t = Product(Product(1, 1), 1)
    assert s.results_in(t) == Product(Product(1, 1), 3)
    assert less_equal(t, s.results_in(t))


def test_tuple_summary():
    s = advance((0, 0), 1)
    assert s == TupleSummary(Add(0), Add(1)) and s.results_in((2, 3)) == (2, 4)
    assert identity((0, 0)).less_equal(s) and not s.less_equal(identity((0, 0)))
    with pytest.raises(ValueError):
        advance((), 1)


def test_results_in_never_goes_backwards():
    for s in [Add(0), Add(3), ProductSummary(Add(2), Add(0)), advance(Product(0, 0))]:
        for t in ([0, 5, 100] if isinstance(s, Add) else [Product(0, 0), Product(4, 7)]):
            r = s.results_in(t)
            assert r is None or less_equal(t, r)
