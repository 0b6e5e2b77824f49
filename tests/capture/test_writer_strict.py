"""ParquetEventWriter keeps every value as it is: a value of another type than its column,
a record of another shape, or a bad parameter is an EventLogError (ValueError for
parameters) naming it -- never a converted value, a dropped field or a log no reader sees."""

import pyarrow as pa
import pytest

from timely_spark import Product
from timely_spark.capture import EventLogError, Messages, ParquetEventReader, ParquetEventWriter, Progress, extract


def one_file(path, records):
    w = ParquetEventWriter(path, flush_seconds=0.0)
    w.push(Messages(0, records))
    w.push(Progress([(0, -1), (1, 1)]))
    return w


@pytest.mark.parametrize("first, later, kind", [
    (7, "007", "a str"),           # was: 7
    (1, True, "a bool"),           # was: 1
    ("5", 5, "an int"),            # was: "5"
    (2.5, 2, "an int"),            # was: 2.0
], ids=["str-after-int", "bool-after-int", "int-after-str", "int-after-float"])
def test_a_value_that_changes_type_in_a_later_file_is_named(tmp_path, first, later, kind):
    w = one_file(tmp_path, [{"x": first, "y": "a"}])
    w.push(Messages(1, [{"x": first, "y": "b"}, {"x": later, "y": "c"}]))
    with pytest.raises(EventLogError, match=rf"worker=0: column 'x' at time 1: {later!r} is {kind}, but the column "
                                            r"holds \w+ values \(fixed by the log's first file\)"):
        w.push(Progress([(1, -1), (2, 1)]))
    assert extract(iter(ParquetEventReader(tmp_path))) == [(0, [{"x": first, "y": "a"}])]   # nothing changed


def test_a_string_after_an_int_in_one_file_names_the_column_time_and_value(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    w.push(Messages(3, [{"n": 1}, {"n": None}, {"n": "two"}]))
    with pytest.raises(EventLogError, match=r"column 'n' at time 3: 'two' is a str, but the column holds int values"):
        w.flush()


def test_tuples_scalars_and_record_batches_keep_their_types(tmp_path):
    w = one_file(tmp_path / "tuples", [(1, "a")])
    w.push(Messages(1, [("b", "a")]))
    with pytest.raises(EventLogError, match=r"column 'f0' at time 1: 'b' is a str, but the column holds int"):
        w.flush()
    w = one_file(tmp_path / "scalars", [1.5])
    w.push(Messages(1, [2]))
    with pytest.raises(EventLogError, match=r"column 'value' at time 1: 2 is an int, but the column holds float"):
        w.flush()
    w = ParquetEventWriter(tmp_path / "batches", flush_seconds=0.0)
    w.push(Messages(Product(0, 0), [pa.record_batch({"x": [1, 2]})]))
    w.push(Progress([(Product(0, 0), -1), (Product(1, 0), 1)]))
    w.push(Messages(Product(1, 0), [pa.record_batch({"x": ["1"]})]))
    with pytest.raises(EventLogError, match=r"column 'x' at time Product\(1, 0\) is string, but the column holds "
                                            r"int64 \(fixed by the log's first file\)"):
        w.flush()


def test_records_of_another_shape_are_named(tmp_path):
    w = ParquetEventWriter(tmp_path / "mixed", flush_seconds=0.0)
    w.push(Messages(0, [{"a": 1, "b": 2}, (1, 2)]))
    with pytest.raises(EventLogError, match=r"record \(1, 2\) at time 0 is a tuple, but this log's records are "
                                            r"dicts of scalars"):
        w.flush()
    w = ParquetEventWriter(tmp_path / "fields", flush_seconds=0.0)
    w.push(Messages(0, [{"a": 1, "b": 2}, {"a": 3}]))            # was: KeyError
    with pytest.raises(EventLogError, match=r"record \{'a': 3\} at time 0 has the fields \['a'\] where the log's "
                                            r"records have \['a', 'b'\]"):
        w.flush()
    w = ParquetEventWriter(tmp_path / "extra", flush_seconds=0.0)
    w.push(Messages(0, [{"a": 1}, {"a": 2, "b": 3}]))            # was: b silently dropped
    with pytest.raises(EventLogError, match=r"has the fields \['a', 'b'\] where the log's records have \['a'\]"):
        w.flush()
    w = ParquetEventWriter(tmp_path / "width", flush_seconds=0.0)
    w.push(Messages(0, [(1, 2, 3), (4, 5)]))                     # was: the 3 silently dropped
    with pytest.raises(EventLogError, match=r"record \(4, 5\) at time 0 has 2 fields where the log's tuples have 3"):
        w.flush()
    w = ParquetEventWriter(tmp_path / "nested", flush_seconds=0.0)
    w.push(Messages(0, [{"a": 1}, {"a": [1, 2]}]))
    with pytest.raises(EventLogError, match=r"column 'a' at time 0: \[1, 2\] is a list, but the column holds scalar"):
        w.flush()


def test_nulls_and_same_typed_values_still_round_trip(tmp_path):
    w = one_file(tmp_path, [{"x": 1, "s": None}, {"x": None, "s": "a"}])
    w.push(Messages(1, [{"s": "b", "x": 2}]))                    # fields in another order: the same record
    w.close()
    assert extract(iter(ParquetEventReader(tmp_path))) == [
        (0, [{"x": 1, "s": None}, {"x": None, "s": "a"}]), (1, [{"x": 2, "s": "b"}])]


@pytest.mark.parametrize("kwargs, message", [
    ({"worker": -1}, r"worker must be this writer's worker index, 0 <= worker < peers \(1\), got -1"),
    ({"worker": 2, "peers": 2}, r"0 <= worker < peers \(2\), got 2"),
    ({"peers": 0}, r"peers must be a whole number >= 1, got 0"),
    ({"flush_seconds": -1}, r"flush_seconds must be a finite number of seconds >= 0, got -1"),
    ({"max_rows": 0}, r"max_rows must be a whole number >= 1, got 0"),
])
def test_writer_parameters_are_checked(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ParquetEventWriter(tmp_path, **kwargs)
    assert not list(tmp_path.iterdir())                           # no directory a reader would not see
