import pickle

import pytest

from timely_spark.progress import Product, check_time, less_equal, less_than, minimum, order_of, sort_key


def test_int_order_and_minimum():
    assert less_equal(3, 3) and less_than(2, 3) and not less_than(3, 3)
    assert minimum(17) == 0


def test_product_is_a_partial_order():
    a, b, c = Product(1, 2), Product(2, 1), Product(2, 2)
    assert not less_equal(a, b) and not less_equal(b, a)  # incomparable
    assert less_equal(a, c) and less_equal(b, c) and less_than(a, c)
    assert not less_than(c, c) and less_equal(c, c)
    # the overloaded operators follow the partial order too
    assert not (a <= b) and not (b <= a) and a < c and c > b and c >= c


def test_nested_product_order():
    a = Product(Product(0, 5), 1)
    b = Product(Product(1, 4), 1)
    c = Product(Product(1, 5), 0)
    assert not less_equal(a, b) and not less_equal(b, a)
    assert less_equal(a, Product(Product(1, 5), 1)) and less_equal(b, Product(Product(1, 5), 1))
    assert not less_equal(a, c)
    assert minimum(a) == Product(Product(0, 0), 0)


def test_tuple_times_are_lexicographic():
    assert less_than((0, 9), (1, 0)) and not less_equal((1, 0), (0, 9))
    assert minimum((4, 5, 6)) == (0, 0, 0) and minimum(()) == ()


def test_sort_key_extends_the_partial_order():
    times = [Product(Product(a, b), c) for a in range(2) for b in range(2) for c in range(2)]
    ordered = sorted(times, key=sort_key)
    for i, x in enumerate(ordered):
        for y in ordered[:i]:
            assert not less_than(x, y)


def test_product_pickles_and_hashes_like_a_value():
    p = Product(Product(1, 2), 3)
    assert pickle.loads(pickle.dumps(p, protocol=5)) == p
    assert type(pickle.loads(pickle.dumps(p))) is Product
    assert {p: 1}[Product(Product(1, 2), 3)] == 1


def test_order_of_and_check_time():
    assert order_of(Product(0, 0)) is Product.less_equal
    assert order_of(5)(1, 2)
    check_time(Product(3, 4), Product(0, 0))
    with pytest.raises(TypeError, match="timestamp"):
        check_time(3, Product(0, 0))
    with pytest.raises(ValueError, match="negative"):
        check_time(-1, 0)
    with pytest.raises(TypeError):
        minimum("epoch")
    with pytest.raises(TypeError):
        minimum(True)


class Epoch(int):
    """An int subclass: checked through its kind, not check_time's int fast path."""


def test_a_negative_int_time_is_the_same_error_on_every_path():
    said = "timestamp -2 is negative; int timestamps start at 0"
    for t, like in [(-2, 0), (Epoch(-2), Epoch(0)), (Product(0, -2), Product(0, 0)), ((1, -2), (0, 0))]:
        with pytest.raises(ValueError) as refused:
            check_time(t, like)
        assert str(refused.value) == said, (t, str(refused.value))
