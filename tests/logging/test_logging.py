"""Engine event logging, dataflow pictures and plots."""

from collections import Counter

import pyarrow.parquet as pq

import timely_spark as ts
from timely_spark.capture import EventQueue, ParquetEventReader, ParquetEventWriter, capture_log, extract


def logged(build, threads=1):
    def work(worker):
        events = []
        worker.log_register().insert("timely", events.extend)
        worker.dataflow(build)
        return events

    return ts.execute(work, threads=threads, timeout=30)


def test_events_of_a_known_dataflow_with_exact_counts():
    (events,) = logged(lambda s: s.to_stream([1, 2, 3]).map(lambda x: x * 2).inspect(lambda x: None))
    kinds = Counter(e["event"] for e in events)
    ops = [(e["address"], e["name"]) for e in events if e["event"] == "operator"]
    assert ops == [("0", "Dataflow0"), ("0.1", "ToStream"), ("0.2", "Map"), ("0.3", "Inspect")]
    channels = [(e["source"], e["target"]) for e in events if e["event"] == "channel"]
    assert channels == [("0.1:0", "0.2:0"), ("0.2:0", "0.3:0")]
    ids = {e["operator"]: e["name"] for e in events if e["event"] == "operator"}
    sent = Counter((ids[e["operator"]], e["count"]) for e in events if e["event"] == "messages" and e["start"])
    received = Counter((ids[e["operator"]], e["count"]) for e in events if e["event"] == "messages" and not e["start"])
    assert sent == Counter({("ToStream", 3): 1, ("Map", 3): 1, ("Inspect", 3): 1})
    assert received == Counter({("Map", 3): 1, ("Inspect", 3): 1})
    starts = [e for e in events if e["event"] == "schedule" and e["start"]]
    stops = [e for e in events if e["event"] == "schedule" and not e["start"]]
    assert len(starts) == len(stops) >= 3
    assert kinds["progress"] >= 1 and kinds["shutdown"] == 1
    assert all(a["elapsed"] <= b["elapsed"] for a, b in zip(events, events[1:]))


def test_nothing_is_recorded_without_a_handler():
    def work(worker):
        worker.dataflow(lambda s: s.to_stream([1]))
        return worker.logger

    assert ts.execute(work, timeout=30) == [None]


def test_probe_frontiers_are_logged():
    def work(worker):
        events = []
        worker.log_register().insert("timely", events.extend)
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        for epoch in range(3):
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=10)
        inp.close()
        return events

    (events,) = ts.execute(work, timeout=30)
    frontiers = [e["detail"] for e in events if e["event"] == "frontier"]
    assert frontiers == ["[0]", "[1]", "[2]", "[3]", "[]"]
    assert [e["frontier"] for e in events if e["event"] == "frontier"] == [(0,), (1,), (2,), (3,), ()]


def test_engine_events_captured_into_a_parquet_log(tmp_path):
    def work(worker):
        capture_log(worker, ParquetEventWriter(tmp_path, worker.index, worker.peers, flush_seconds=0.0))
        worker.dataflow(lambda s: s.to_stream(range(10)).exchange(lambda x: x).count())

    ts.execute(work, threads=2, timeout=30)
    table = pq.read_table(tmp_path)
    assert {"event", "operator", "name", "elapsed", "worker"} <= set(table.column_names)
    for w in range(2):
        events = [e for _, batch in extract(ParquetEventReader(tmp_path, w)) for e in batch]
        names = [e["name"] for e in events if e["event"] == "operator"]
        assert names == ["Dataflow0", "ToStream", "Exchange", "Count"]
    assert (tmp_path / "worker=1" / "_CLOSED").exists()


def nested(scope):
    def outer(mid):
        handle, cycle = mid.feedback(1, name="OuterFeedback")

        def inner(deep):
            h2, c2 = deep.feedback(1, name="InnerFeedback")
            x = mid_in.enter(deep).concat(c2, name="InnerConcat")
            x.filter(lambda v: v > 0, name="Positive").map(lambda v: v - 1, name="Dec").connect_loop(h2)
            return x.leave()

        mid_in = scope.to_stream([2]).enter(mid).concat(cycle, name="OuterConcat")
        out = mid.iterative(inner, name="Inner")
        out.filter(lambda v: False, name="Never").connect_loop(handle)
        return out.leave()

    return scope.iterative(outer, name="Outer").inspect(lambda x: None, name="Show")


def test_graph_of_a_two_level_nested_dataflow_lists_exactly_its_operators_and_edges():
    (graphs,) = ts.execute(lambda w: (w.dataflow(nested), w.dataflow_graphs())[1], timeout=30)
    (g,) = graphs
    assert g.operators() == [
        ("0.1", "Outer"),
        ("0.1.1", "OuterFeedback"), ("0.1.2", "OuterConcat"), ("0.1.3", "Inner"),
        ("0.1.3.1", "InnerFeedback"), ("0.1.3.2", "InnerConcat"), ("0.1.3.3", "Positive"), ("0.1.3.4", "Dec"),
        ("0.1.4", "Never"),
        ("0.2", "ToStream"), ("0.3", "Show"),
    ]
    assert sorted(g.edges()) == sorted([
        ("0.2:0", "0.1:0"), ("0.1:0", "0.3:0"),                              # top scope
        ("0.1:in0", "0.1.2:0"), ("0.1.1:0", "0.1.2:1"), ("0.1.2:0", "0.1.3:0"),
        ("0.1.3:0", "0.1.4:0"), ("0.1.4:0", "0.1.1:0"), ("0.1.3:0", "0.1:out0"),   # outer loop
        ("0.1.3:in0", "0.1.3.2:0"), ("0.1.3.1:0", "0.1.3.2:1"), ("0.1.3.2:0", "0.1.3.3:0"),
        ("0.1.3.3:0", "0.1.3.4:0"), ("0.1.3.4:0", "0.1.3.1:0"), ("0.1.3.2:0", "0.1.3:out0"),  # inner loop
    ])
    mermaid = g.to_mermaid()
    assert mermaid.startswith("flowchart LR") and mermaid.count("subgraph") == 2 and "InnerFeedback" in mermaid
    assert g.to_dot().count("subgraph cluster_") == 2
    assert g._repr_markdown_().startswith("```mermaid")


def test_plots_make_image_files(tmp_path):
    from timely_spark.plot import plot_capture, plot_frontiers

    queue = EventQueue()

    def work(worker):
        events = []
        worker.log_register().insert("timely", events.extend)

        def build(s):
            inp, stream = s.new_input()
            stream.capture_into(queue)
            return inp, stream.probe()

        inp, probe = worker.dataflow(build)
        for epoch in range(4):
            inp.send_batch(list(range(epoch + 1)))
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=10)
        inp.close()
        return events

    (events,) = ts.execute(work, timeout=30)
    plot_capture(list(queue), path=str(tmp_path / "capture.png"))
    plot_frontiers(events, path=str(tmp_path / "frontiers.png"))
    for name in ("capture.png", "frontiers.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_a_probe_that_stopped_early_keeps_its_last_frontier_to_the_end_of_the_plot():
    from timely_spark.plot import frontier_series

    def work(worker):
        events = []
        worker.log_register().insert("timely", events.extend)

        def hold(cap, info):                      # holds time 2 until its input ends
            held = {}

            def logic(input, output):
                for c, batch in input:
                    if c.time == 2:
                        held["cap"] = c.retain()
                if input.frontier.is_empty() and held.get("cap"):
                    held.pop("cap").drop()
            cap.drop()
            return logic

        def build(s):
            inp, stream = s.new_input()
            before, after = ts.ProbeHandle("before"), ts.ProbeHandle("after")
            stream.probe_with(before).unary_frontier(None, "Hold", hold).probe_with(after)
            return inp, before, after

        inp, before, after = worker.dataflow(build)
        for epoch in range(6):
            inp.send(epoch)
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: before.less_than(inp.time), timeout=10)
        inp.close()
        while worker.step():
            pass
        return events

    (events,) = ts.execute(work, timeout=30)
    series = frontier_series(events)
    xs, ys = series[("after", 0)]
    end = max(e["elapsed"] for e in events)
    assert ys[-1] == 2 and xs[-1] == end          # the line runs on at 2 to the end
    assert series[("before", 0)][1][-1] == 6
