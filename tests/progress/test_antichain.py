from timely_spark.progress import Add, Antichain, ChangeBatch, MutableAntichain, Product, ProductSummary


def test_antichain_keeps_minimal_elements():
    a = Antichain()
    assert a.insert(Product(2, 2))
    assert a.insert(Product(1, 3))
    assert not a.insert(Product(2, 3))  # above both
    assert a.insert(Product(0, 0))      # below both: replaces them
    assert a == Antichain([Product(0, 0)]) and len(a) == 1


def test_antichain_queries():
    a = Antichain([Product(0, 3), Product(2, 0)])
    assert a.less_equal(Product(0, 3)) and not a.less_than(Product(0, 3))
    assert a.less_than(Product(1, 3)) and not a.less_equal(Product(1, 2))
    assert a.dominates(Antichain([Product(5, 5)])) and not a.dominates([Product(1, 1)])
    assert a == Antichain([Product(2, 0), Product(0, 3)]) and a != Antichain([Product(0, 3)])
    assert Antichain().is_empty() and not Antichain().less_equal(0)
    assert sorted(a, key=tuple) == [Product(0, 3), Product(2, 0)]


def test_antichain_of_summaries():
    a = Antichain([ProductSummary(Add(1), Add(0)), ProductSummary(Add(0), Add(1)), ProductSummary(Add(1), Add(1))])
    assert len(a) == 2


def test_mutable_antichain_reports_frontier_changes():
    m = MutableAntichain()
    assert m.update_iter([(Product(1, 0), 1)]) == [(Product(1, 0), 1)]
    assert m.update_iter([(Product(0, 1), 2)]) == [(Product(0, 1), 1)]
    assert m.update_iter([(Product(1, 1), 1)]) == []               # not minimal
    assert m.update_iter([(Product(0, 1), -1)]) == []              # still positive
    assert sorted(m.update_iter([(Product(0, 1), -1)])) == [(Product(0, 1), -1)]
    assert set(m.elements()) == {Product(1, 0)}
    assert m.less_than(Product(1, 1)) and not m.less_equal(Product(0, 5))


def test_mutable_antichain_tolerates_negative_counts():
    m = MutableAntichain()
    assert m.update_iter([(3, -1)]) == []          # a retraction arriving first
    assert m.is_empty()
    assert m.update_iter([(3, 1)]) == []           # cancels to zero
    assert m.update_iter([(4, 1), (2, 1)]) == [(2, 1)]
    assert m.update_iter([(2, -1)]) == [(2, -1), (4, 1)]
    assert m.count_for(4) == 1 and m.count_for(3) == 0


def test_change_batch():
    b = ChangeBatch([("x", 1), ("y", 2)])
    b.update("x", -1)
    b.update("z", 0)
    assert b.items() == [("y", 2)] and not b.is_empty()
    other = ChangeBatch()
    b.drain_into(other)
    assert b.is_empty() and other == ChangeBatch([("y", 2)])


def test_a_transiently_negative_count_never_enters_the_frontier():
    counts = MutableAntichain()
    assert counts.update_iter([(3, -1)]) == [] and counts.frontier() == Antichain()
    assert counts.update_iter([(5, +1)]) == [(5, 1)]
    assert counts.elements() == [5]                    # 3 (count -1) is not in it
    assert counts.update_iter([(3, +1)]) == []         # back to zero: still [5]
    assert counts.elements() == [5]


def test_int_times_take_the_total_order_path_and_agree_with_the_general_one():
    # ints take MutableAntichain's total-order path; floats (the same order) the general one
    import random

    rng = random.Random(7)
    for _ in range(300):
        ints, floats = MutableAntichain(), MutableAntichain()
        for _ in range(rng.randrange(1, 8)):
            batch = [(rng.randrange(5), rng.choice([-2, -1, 0, 1, 1, 2])) for _ in range(rng.randrange(1, 5))]
            got = ints.update_iter(batch)
            want = floats.update_iter([(float(t), d) for t, d in batch])
            assert sorted(got) == sorted((int(t), d) for t, d in want), batch
            assert ints.elements() == [int(t) for t in floats.elements()]
            assert [ints.less_than(t) for t in range(6)] == [floats.less_than(float(t)) for t in range(6)]
