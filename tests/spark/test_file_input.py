"""ts.spark.transform over a plain Parquet scan: the barrier tasks read the files
themselves (no shuffle before the barrier stage); anything else goes through Spark."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark.errors import SparkJobError
from timely_spark.graph import connected_components, union_find
from timely_spark.spark.file_input import file_input, plain_parquet_scan


@pytest.fixture(scope="module")
def edge_files(tmp_path_factory):
    """Two Parquet files of int32 edges (row groups of 700 rows): 3,000 edges."""
    where = tmp_path_factory.mktemp("edges")
    rng = np.random.default_rng(5)
    for part, n in (("a", 1800), ("b", 1200)):
        table = pa.table({"s": rng.integers(0, 900, n).astype(np.int32), "d": rng.integers(0, 900, n).astype(np.int32),
                          "w": rng.random(n).astype(np.float32)})
        pq.write_table(table, where / f"part-{part}.parquet", row_group_size=700)
    return where


def plan_text(df):
    return df._jdf.queryExecution().executedPlan().toString()


def identity(scope, batches):
    return batches


def test_the_tasks_read_a_plain_parquet_scan_themselves_in_equal_shares(spark, edge_files):
    df = spark.read.parquet(str(edge_files)).selectExpr("cast(s as bigint) as src", "d as dst", "cast(w as double) w")
    stats: dict = {}
    out = ts.spark.transform(df, identity, "src long, dst long, w double", workers=2, stats=stats)
    plan = plan_text(out)
    assert plan.count("Exchange") == 1 and "FileScan" not in plan     # only the stage boundary after
    got = sorted(tuple(r) for r in out.collect())
    assert got == sorted(tuple(r) for r in df.collect())
    assert sorted(t["input_from"] for t in stats["tasks"]) == ["files", "files"]
    assert sorted(t["rows_out"] for t in stats["tasks"]) == [1500, 1500]


def test_any_other_plan_is_read_by_spark_behind_a_shuffle(spark, edge_files, tmp_path):
    df = spark.read.parquet(str(edge_files))
    narrowed = df.selectExpr("cast(s as smallint) as src", "d")
    for other in (df.where("s > 3"), narrowed, df.groupBy("s").count(), df.selectExpr("s + 1 as s")):
        assert file_input(other, 2) is None
    assert plain_parquet_scan(df.selectExpr("cast(s as bigint) as src", "cast(w as double) as w")) is not None
    pq.write_table(pa.table({"s": pa.array([1], pa.int64())}), tmp_path / "x=1.parquet")
    (tmp_path / "y=2").mkdir()
    pq.write_table(pa.table({"s": pa.array([2], pa.int64())}), tmp_path / "y=2" / "f.parquet")
    assert file_input(spark.read.parquet(str(tmp_path / "y=2"), str(tmp_path / "x=1.parquet")), 2) is not None
    assert file_input(spark.read.parquet(str(tmp_path)), 2) is None          # a partition column: y

    stats: dict = {}
    out = ts.spark.transform(df.where("s > 3"), identity, "s int, d int, w float", workers=2, stats=stats)
    assert plan_text(out).count("Exchange") == 2
    assert out.count() == df.where("s > 3").count()
    assert [t["input_from"] for t in stats["tasks"]] == ["spark", "spark"]


@pytest.mark.slow
def test_a_file_changed_after_planning_is_a_clear_error(spark, tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"src": np.arange(10), "dst": np.arange(10)}), path, row_group_size=5)
    out = ts.spark.transform(spark.read.parquet(str(path)), identity, "src long, dst long", workers=2)
    pq.write_table(pa.table({"src": np.arange(12), "dst": np.arange(12)}), path, row_group_size=5)
    with pytest.raises(ts.WorkerError, match="changed after the DataFrame was planned") as err:
        out.collect()
    assert isinstance(err.value.cause, SparkJobError) and "e.parquet" in str(err.value.cause)


def test_graph_functions_read_edge_files_without_a_shuffle(spark, edge_files):
    df = spark.read.parquet(str(edge_files))
    stats: dict = {}
    out = connected_components(df, src="s", dst="d", stats=stats)
    assert plan_text(out).count("Exchange") == 1
    edges = pq.read_table(edge_files)
    want = union_find(zip(edges["s"].to_pylist(), edges["d"].to_pylist()))
    assert {r.vertex: r.component for r in out.collect()} == want
    assert [t["input_from"] for t in stats["tasks"]] == ["files", "files"]


def test_a_worker_gets_sparks_small_arrow_batches_joined(spark):
    """Spark hands mapInArrow batches of 10,000 rows; the worker sees them joined."""
    def sizes(scope, batches):
        return batches.map(lambda rb: pa.record_batch({"rows": [rb.num_rows]}))

    df = spark.range(0, 30_000, 1, 1)
    out = ts.spark.transform(df, sizes, "rows long", workers=1)
    assert [r.rows for r in out.collect()] == [30_000]


def shuffled_schemas(df):
    """The schemas of the rows each shuffle of ``df``'s physical plan moves."""
    found, todo = [], [df._jdf.queryExecution().sparkPlan()]
    while todo:
        node = todo.pop()
        if node.getClass().getSimpleName() == "ShuffleExchangeExec":
            found.append(node.schema().simpleString())
        todo.extend(node.children().apply(i) for i in range(node.children().size()))
    return found


def test_output_rows_cross_the_stage_boundary_packed_and_come_back_as_the_schema(spark):
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])

    def named(scope, batches):
        return batches.map(lambda rb: pa.record_batch({"id": rb.column(0), "name": pc.cast(rb.column(0), pa.string())}))

    df = spark.range(0, 5000, 1, 2)
    for struct in (schema, "id long, name string"):           # a non-nullable field: not packed; all nullable
        out = ts.spark.transform(df, named, struct, workers=2)
        packed = any(s.startswith("struct<id:array<bigint>,name:array<string>") for s in shuffled_schemas(out))
        assert packed == (struct is not schema)
        assert out.schema == (schema if struct is schema else schema.fromDDL(struct))
        rows = out.collect()
        assert sorted(r.id for r in rows) == list(range(5000)) and all(r.name == str(r.id) for r in rows)


def test_more_file_partitions_than_slots_are_read_by_the_slots_tasks(spark, edge_files):
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4k")
    try:
        df = spark.read.parquet(str(edge_files))
        assert df.rdd.getNumPartitions() > 2
        stats: dict = {}
        with pytest.warns(UserWarning, match="reading its files in 2 timely workers"):
            out = ts.spark.transform(df, identity, "s int, d int, w float", stats=stats)
        assert out.count() == 3000
        assert [t["input_from"] for t in stats["tasks"]] == ["files", "files"]
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
