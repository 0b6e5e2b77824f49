"""Small messages gathered in one step travel as one sealed frame (a bundle), in order."""

import numpy as np
import pytest

from timely_spark.communication.allocator import Inbox
from timely_spark.communication.codec import encode
from timely_spark.communication.tcp import BUNDLE, BUNDLED, CONTROL, TcpAllocator
from timely_spark.errors import FrameLimitReached

from .test_encryption import connected_pair


@pytest.mark.parametrize("encrypt", [True, False])
@pytest.mark.slow
def test_gathered_messages_go_as_one_frame_and_arrive_in_order_around_a_large_one(encrypt):
    meshes, fabrics = connected_pair(max_frame=1 << 20, encrypt=encrypt)
    conn = meshes[1].connections[0]
    try:
        before = conn.frames_sealed
        for i in range(3):
            conn.send(7, 1, 0, *encode((i, [f"small {i}"])), gather=True)
        assert conn.frames_sealed == before                     # gathered, not sealed yet
        big = bytes(range(256)) * (12 << 10)                    # 3 MiB: 4 frames of 1 MiB at most
        conn.send(8, 1, 0, *encode((3, [big])))                 # what was gathered goes first, as one frame
        assert conn.frames_sealed == before + 1 + 4
        for i in range(4, 6):
            conn.send(7, 1, 0, *encode((i, [f"small {i}"])), gather=True)
        conn.flush()
        assert conn.frames_sealed == before + 1 + 4 + 1
        got = [fabrics[0].mailboxes[0].get(timeout=20) for _ in range(6)]
        assert [(c, t) for c, (t, _) in got] == [(7, 0), (7, 1), (7, 2), (8, 3), (7, 4), (7, 5)]
        assert got[3][1][1] == [big] and got[5][1][1] == ["small 5"]
        assert fabrics[0].failure is None
    finally:
        for m in meshes:
            m.shutdown(clean=False)


@pytest.mark.parametrize("body", [BUNDLED.pack(1000) + b"x" * 40, b"\x01"], ids=["too long", "cut short"])
def test_a_malformed_bundle_from_an_authenticated_peer_fails_the_connection_naming_it(body):
    meshes, fabrics = connected_pair()
    try:
        meshes[1].connections[0].send(CONTROL, 0, 0, BUNDLE, [body])
        wake = fabrics[0].mailboxes[0].get(timeout=20)          # the failure wakes the worker
        assert wake is not None
        failure = fabrics[0].failure[1]
        assert "process 1" in str(failure) and "bundle" in str(failure)
    finally:
        for m in meshes:
            m.shutdown(clean=False)


def test_a_bundle_sealed_past_the_frame_limit_fails_the_run_at_the_flush():
    meshes, fabrics = connected_pair(frame_limit=2)
    conn = meshes[1].connections[0]
    try:
        for _ in range(2):                                   # frames 0 and 1: a bundle of 2 each
            conn.send(7, 1, 0, *encode((0, ["a"])), gather=True)
            conn.send(7, 1, 0, *encode((0, ["b"])), gather=True)
            conn.flush()
        conn.send(7, 1, 0, *encode((0, ["c"])), gather=True)   # gathered: nothing sealed yet
        with pytest.raises(FrameLimitReached, match="process 0 .*sealed 2 frames"):
            conn.flush()
        assert isinstance(fabrics[1].failure[1], FrameLimitReached)
        got = [fabrics[0].mailboxes[0].get(timeout=10) for _ in range(4)]
        assert [m[1][1] for m in got] == [["a"], ["b"], ["a"], ["b"]]
    finally:
        for m in meshes:
            m.shutdown(clean=False)


def test_a_steps_small_messages_are_written_at_its_release_and_arrive_decoded_whatever_their_kind():
    meshes, fabrics = connected_pair(wakeable=True)
    conn = meshes[1].connections[0]
    sender = TcpAllocator(1, fabrics[1], meshes[1], 2)
    try:
        to_0 = sender.pushers(7, Inbox(lambda: None))[0]     # the pusher to worker 0 (another process)
        before = conn.frames_sealed
        conn.send(7, 1, 0, *encode((6, [np.arange(3)])), gather=True)   # a pickle with a buffer out of band
        assert meshes[1].unwritten == {conn}                 # named for the step's end to write
        meshes[1].unwritten.clear()
        to_0.push([((1, 0), 5, 1), ((2, 0), 5, -1)])        # a progress batch: a pickle in band
        assert meshes[1].unwritten == {conn}                 # the same
        to_0.push((5, ["x", 3]))                             # a few records: the same
        assert conn.frames_sealed == before                  # gathered, not sealed
        sender.release()                                     # the step's end: one frame, all three in it
        assert not meshes[1].unwritten and conn.frames_sealed == before + 1
        got = [fabrics[0].mailboxes[0].get(timeout=20) for _ in range(3)]
        assert got[0][0] == 7 and got[0][1][0] == 6 and got[0][1][1][0].tolist() == [0, 1, 2]
        assert got[1] == (7, [((1, 0), 5, 1), ((2, 0), 5, -1)]) and got[2] == (7, (5, ["x", 3]))
        sender.release()                                     # nothing gathered since: nothing sealed
        assert conn.frames_sealed == before + 1 and fabrics[0].failure is None
    finally:
        for m in meshes:
            m.shutdown(clean=False)


def test_lists_pushed_to_another_process_arrive_whatever_their_size_and_buffers():
    meshes, fabrics = connected_pair(wakeable=True)
    sender = TcpAllocator(1, fabrics[1], meshes[1], 2)
    try:
        to_0 = sender.pushers(7, Inbox(lambda: None))[0]
        big = list(range(20_000))                            # pickled in band, over the bundle's bound: alone
        sent = [[((1, 0), 5, 1)], [np.arange(4)], big, [np.arange(2)], [((2, 0), 6, -1)]]
        for payload in sent:
            to_0.push(payload)
        sender.release()
        got = [fabrics[0].mailboxes[0].get(timeout=20) for _ in range(len(sent))]
        assert [c for c, _ in got] == [7] * len(sent)
        assert got[0][1] == sent[0] and got[2][1] == big and got[4][1] == sent[4]
        assert got[1][1][0].tolist() == [0, 1, 2, 3] and got[3][1][0].tolist() == [0, 1]
        assert fabrics[0].failure is None and fabrics[1].failure is None
    finally:
        for m in meshes:
            m.shutdown(clean=False)


class _Counted:
    """Data with a buffer out of band that counts how often it is pickled."""

    pickled = 0

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __reduce_ex__(self, protocol):
        type(self).pickled += 1
        return _Counted, (self.data,)


def test_a_list_with_buffers_out_of_band_is_pickled_once_and_arrives():
    meshes, fabrics = connected_pair(wakeable=True)
    sender = TcpAllocator(1, fabrics[1], meshes[1], 2)
    try:
        to_0 = sender.pushers(7, Inbox(lambda: None))[0]
        _Counted.pickled = 0
        to_0.push([_Counted(np.arange(100_000))])            # its array goes out of band
        sender.release()
        channel, got = fabrics[0].mailboxes[0].get(timeout=20)
        assert _Counted.pickled == 1
        assert channel == 7 and got[0].data.tolist() == list(range(100_000))
    finally:
        for m in meshes:
            m.shutdown(clean=False)
