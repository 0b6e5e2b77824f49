"""Streaming offsets: the log's frontier as JSON, checked to follow the last one."""

import pytest

from timely_spark.capture import EventLogError
from timely_spark.progress import Antichain
from timely_spark.spark import offsets


def test_offsets_refuse_a_frontier_that_went_back_or_another_writer(tmp_path):
    desc = "int"
    a = offsets.offset({}, desc, Antichain([3]), {0: "x"})
    assert offsets.frontier(a) == Antichain([3]) and offsets.initial(desc)["frontier"] == [0]
    offsets.check_follows("log", offsets.initial(desc), a)
    with pytest.raises(EventLogError, match="went back"):
        offsets.check_follows("log", a, offsets.offset({}, desc, Antichain([2]), {0: "x"}))
    with pytest.raises(EventLogError, match="worker=0 holds another event log"):
        offsets.check_follows("log", a, offsets.offset({}, desc, Antichain([4]), {0: "y"}))
    with pytest.raises(EventLogError, match="another event log is at this path"):
        offsets.check_follows("log", a, offsets.offset({}, {"tuple": ["int"]}, Antichain([(4,)]), {}))
