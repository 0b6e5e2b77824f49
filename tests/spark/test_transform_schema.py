"""transform's output must fit its schema exactly (by name, with safe casts); transform is
lazy, and sized to the task slots."""

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.spark.output_schema import arrow_schema, conform, rows_batch


def output_of(batch):
    return lambda scope, s: s.map(lambda rb: batch)


def first_on_spark(cases):
    """The cases of a misfit test, each with whether it also runs on Spark: the first does."""
    return [(i == 0, *case) for i, case in enumerate(cases)]


def does_not_fit(df, schema, match, *, batch=None, records=None, on_spark=False):
    """The check each worker runs on its output (``conform`` a batch, ``rows_batch`` rows)
    raises SchemaMismatch matching ``match``; ``on_spark``: so does ``ts.spark.transform`` on
    Spark, the error reaching the driver as itself.  (Each Spark run of a failing transform
    costs seconds, Spark retrying the stage, so one case a test goes through Spark.)"""
    _, arrow = arrow_schema(df, schema)
    with pytest.raises(ts.spark.SchemaMismatch, match=r"^worker \d: " + match):
        conform(batch, arrow, 0) if records is None else rows_batch(records, arrow, 0)
    if not on_spark:
        return None
    build = output_of(batch) if records is None else (lambda scope, s: s.flat_map(lambda r: records))
    with pytest.raises(ts.spark.SchemaMismatch, match=r"^worker \d: " + match) as err:
        ts.spark.transform(df, build, schema, rows=records is not None).collect()
    return err


def test_batches_of_another_layout_are_cast_and_reordered(spark):
    df = spark.createDataFrame([(1,)], "x long")
    batch = pa.record_batch({"b": pa.array(["x"]), "a": pa.array([7], pa.int32())})     # int32, other order
    rows = ts.spark.transform(df, output_of(batch), "a long, b string").collect()
    assert [tuple(r) for r in rows] == [(7, "x")]


@pytest.mark.parametrize("on_spark,batch,match", first_on_spark([
    (pa.record_batch({"a": [1], "b": ["x"], "c": [2.5]}), r"the output has column\(s\) \['c'\]"),
    (pa.record_batch({"a": [1]}), r"the output has no column\(s\) \['b'\]"),
    (pa.record_batch({"a": [2**40], "b": ["x"]}), r"column 'a' is int64, which does not fit int32"),
]))
def test_a_missing_extra_or_unfitting_column_is_an_error_naming_it(any_spark, on_spark, batch, match):
    df = any_spark.createDataFrame([(1,)], "x long")
    err = does_not_fit(df, "a int, b string", match, batch=batch, on_spark=on_spark)   # the cause first, as itself
    if err is not None and not ts.spark.is_connect(any_spark):     # the Connect client raises "from None"
        assert err.value.__cause__ is not None     # Spark's own error stays reachable


@pytest.mark.parametrize("on_spark,row,match", first_on_spark([
    ({"wrong": 1}, r"an output row \{'wrong': 1\} lacks column\(s\) \['n', 'word'\] or has column\(s\) \['wrong'\]"),
    ({"word": "a"}, r"an output row \{'word': 'a'\} lacks column\(s\) \['n'\]"),
    (("a",), r"an output row \('a',\) has 1 value\(s\), the schema \(word, n\) 2"),
    (("a", 1, 2), r"an output row \('a', 1, 2\) has 3 value\(s\)"),
    ({"word": "a", "n": 1.5}, r"column 'n' is double, which does not fit int64"),
    ({"word": "a", "n": "12"}, r"column 'n' is string, which does not fit int64"),
    ({"word": 3, "n": 1}, r"column 'word' is int64, which does not fit string"),
]))
def test_rows_that_do_not_fit_the_schema_are_an_error_naming_it(spark, on_spark, row, match):
    df = spark.createDataFrame([(1,)], "x long")
    does_not_fit(df, "word string, n long", match, records=[row], on_spark=on_spark)


def test_rows_as_dicts_tuples_and_rows_fit_the_schema(spark):
    from pyspark.sql import Row

    df = spark.createDataFrame([(1,), (2,), (3,)], "x long").coalesce(1)
    out = [{"n": 1, "word": "a", "tags": {"x": 1}}, ("b", 2, None), Row(word="c", n=None, tags={}),
           {"word": None, "n": 4.0, "tags": {"y": 2, "z": 3}}]
    rows = ts.spark.transform(df, lambda scope, s: s.flat_map(lambda r: out if r["x"] == 1 else []),
                              "word string, n long, tags map<string, long>", rows=True, workers=1).collect()
    assert sorted((tuple(r) for r in rows), key=str) == sorted(
        [("a", 1, {"x": 1}), ("b", 2, None), ("c", None, {}), (None, 4, {"y": 2, "z": 3})], key=str)


def test_transform_after_a_shuffle_with_200_partitions(spark):
    df = spark.range(1000).repartition(200, "id")
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.warns(UserWarning, match="200 partitions"):
        counted = ts.spark.transform(df, lambda scope, s: s.map(lambda rb: pa.record_batch({"n": [rb.num_rows]})),
                                     "n long")
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before    # lazy: no job yet
    assert sum(r["n"] for r in counted.collect()) == 1000
    assert ts.spark.transform(df, lambda scope, s: s, "id long", workers=2).rdd.getNumPartitions() == 2


MAP_SL = pa.map_(pa.string(), pa.int64())


@pytest.mark.parametrize("on_spark,column,schema,match", first_on_spark([
    (pa.array([["7"]]), "a array<long>", r"column 'a\[\]' is string, which does not fit int64 \(text"),
    (pa.array([[7]]), "a array<string>", r"column 'a\[\]' is int64, which does not fit string \(text"),
    (pa.array([{"b": 5}]), "a struct<b: string>", r"column 'a\.b' is int64, which does not fit string \(text"),
    (pa.array([{"b": [{"c": 2**40}]}]), "a struct<b: array<struct<c: int>>>",
     r"column 'a\.b\[\]\.c' is int64, which does not fit int32 \("),
    (pa.array([[("k", 5)]], MAP_SL), "a map<string, string>",
     r"column 'a\{value\}' is int64, which does not fit string"),
    (pa.array([[(5, 5)]], pa.map_(pa.int64(), pa.int64())), "a map<string, long>",
     r"column 'a\{key\}' is int64, which does not fit string"),
    (pa.array([[True]]), "a array<long>", r"column 'a\[\]' is bool, which does not fit int64 \(a bool does not"),
    (pa.array([{"b": 1, "c": 2}]), "a struct<b: long>", r"column 'a' is struct<b: int64, c: int64>, which does not "
                                                       r"fit struct<b: int64> \(extra field\(s\) \['c'\]\)"),
    (pa.array([{"b": 1}]), "a struct<b: long, d: long>", r"column 'a' .* \(no field\(s\) \['d'\]\)"),
]))
def test_nested_parts_that_do_not_fit_are_an_error_naming_their_path(spark, on_spark, column, schema, match):
    df = spark.createDataFrame([(1,)], "x long")
    does_not_fit(df, schema, match, batch=pa.record_batch({"a": column}), on_spark=on_spark)


@pytest.mark.parametrize("on_spark,value,schema,match", first_on_spark([
    (["7"], "a array<long>", r"column 'a\[\]' is string, which does not fit int64"),
    ({"b": 5}, "a struct<b: string>", r"column 'a\.b' is int64, which does not fit string"),
    ({"k": 5}, "a map<string, string>", r"column 'a\{value\}' is int64, which does not fit string"),
    ([{"k": {"z": "1"}}], "a array<map<string, map<string, long>>>",
     r"column 'a\[\]\{value\}\{value\}' is string, which does not fit int64"),
    ({"b": 1, "c": 2}, "a struct<b: long>", r"column 'a' has a value \{'b': 1, 'c': 2\} that does not fit its "
                                            r"fields \(b\): extra field\(s\) \['c'\]"),
    ([{"b": 1.5}], "a array<struct<b: long>>", r"column 'a\[\]\.b' is double, which does not fit int64"),
    ("xy", "a array<struct<b: long>>", r"column 'a' has a value 'xy' that is not a list"),
]))
def test_nested_row_values_that_do_not_fit_are_an_error_naming_their_path(spark, on_spark, value, schema, match):
    df = spark.createDataFrame([(1,)], "x long")
    does_not_fit(df, schema, match, records=[{"a": value}], on_spark=on_spark)


NESTED = "a array<struct<b: long, tags: map<string, array<double>>>>, m map<string, struct<c: string>>"
NESTED_ROW = ([{"b": 1, "tags": {"x": [0.5, None]}}, None, {"b": None, "tags": None}], {"k": {"c": "v"}, "l": None})


@pytest.mark.parametrize("rows", [False, True])
def test_nested_outputs_that_fit_come_back_whole(spark, rows):
    from pyspark.sql import Row

    df = spark.createDataFrame([NESTED_ROW], NESTED)     # identity: Spark's own nested types, out as in
    got = ts.spark.transform(df, lambda scope, s: s, NESTED, rows=rows).collect()
    assert got == df.collect()
    a = pa.array([[{"tags": [("x", [1])], "b": 2}]], pa.list_(pa.struct([         # int64 into double, another order
        ("tags", pa.map_(pa.string(), pa.list_(pa.int64()))), ("b", pa.int64())])))
    ints = pa.record_batch({"m": pa.array([[("k", {"c": "v"})]], pa.map_(pa.string(), pa.struct([("c", pa.string())]))),
                            "a": a})
    build = (lambda scope, s: s.map(lambda r: {"m": [("k", Row(c="v"))], "a": [{"tags": {"x": [1]}, "b": 2}]})) \
        if rows else output_of(ints)
    assert ts.spark.transform(df, build, NESTED, rows=rows).collect() == [
        Row(a=[Row(b=2, tags={"x": [1.0]})], m={"k": Row(c="v")})]


@pytest.fixture
def new_york(spark):
    """The session in a time zone other than UTC (so a zone that went missing shows)."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.parametrize("rows", [False, True])
def test_timestamp_and_timestamp_ntz_go_in_and_out(new_york, rows):
    import datetime as dt
    from zoneinfo import ZoneInfo

    spark = new_york
    df = spark.sql("select timestamp'2024-01-01 12:00:00' as t, timestamp_ntz'2024-01-01 12:00:00' as n, "
                   "array(timestamp'2024-07-01 09:30:00') as ts")
    schema = "t timestamp, n timestamp_ntz, ts array<timestamp>"
    assert ts.spark.transform(df, lambda scope, s: s, schema, rows=rows).collect() == df.collect()
    noon_utc = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)          # 07:00 in New York
    if rows:
        build = lambda scope, s: s.map(lambda r: (noon_utc, dt.datetime(2024, 1, 1, 12),   # noqa: E731
                                                  [noon_utc.astimezone(ZoneInfo("Asia/Tokyo"))]))
    else:
        build = output_of(pa.record_batch({"t": pa.array([noon_utc]), "n": pa.array([dt.datetime(2024, 1, 1, 12)]),
                                           "ts": pa.array([[noon_utc]], pa.list_(pa.timestamp("s", "Asia/Tokyo")))}))
    got = ts.spark.transform(df, build, schema, rows=rows).selectExpr(
        "cast(t as string)", "cast(n as string)", "cast(ts[0] as string)").collect()
    assert [tuple(r) for r in got] == [("2024-01-01 07:00:00", "2024-01-01 12:00:00", "2024-01-01 07:00:00")]


@pytest.mark.parametrize("on_spark,rows,value,schema,match", first_on_spark([
    (True, "naive", "t timestamp", r"column 't' is timestamp\[us\], which does not fit timestamp\[us, "
                                   r"tz=America/New_York\] \(a time without a time zone is not an instant"),
    (True, "aware", "t timestamp_ntz", r"column 't' is timestamp\[us, tz=UTC\], which does not fit timestamp\[us\]"),
    (True, "mixed", "t timestamp", r"column 't' mixes datetimes with a time zone and without one"),
    (False, "naive", "t array<timestamp>", r"column 't\[\]' is timestamp\[us\], which does not fit"),
    (False, "nanos", "t timestamp_ntz", r"column 't' is timestamp\[ns\], which does not fit timestamp\[us\] "
                                        r"\(.*would lose data"),
    (False, "number", "t timestamp", r"column 't' is int64, which does not fit timestamp\[us, tz=America/New_York\] "
                                     r"\(a number does not become an instant\)"),
]))
def test_a_time_that_does_not_fit_is_an_error_naming_the_column(new_york, on_spark, rows, value, schema, match):
    import datetime as dt

    naive, aware = dt.datetime(2024, 1, 1, 12), dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    values = {"naive": [naive], "aware": [aware], "mixed": [aware, naive], "number": [5],
              "nanos": pa.array([1_000_000_000_000_000_001], pa.timestamp("ns"))}[value]
    df = new_york.createDataFrame([(1,)], "x long")
    if rows:
        does_not_fit(df, schema, match, records=[{"t": v} for v in values], on_spark=on_spark)
    else:
        column = pa.array([values]) if schema.startswith("t array") else pa.array(values)
        does_not_fit(df, schema, match, batch=pa.record_batch({"t": column}), on_spark=on_spark)
