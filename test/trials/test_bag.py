"""Trial bags: standard, indexed rosbag2 (mcap) bags that every reader takes, after a clean close and after a crash."""

import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap.records import Message as McapMessage
from mcap.stream_reader import StreamReader, breakup_chunk
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Reader

from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import FLUSH_INTERVAL_S, TrialBagWriter, read_bag, typestore

ROBOT_T0 = 1_000_000_000_000  # robot stamps (ns): an epoch of their own that jumps back every few messages


def robot_stamp(i: int) -> int:
    return ROBOT_T0 + i * 10_000_000 - (i % 5) * 40_000_000


def read_with_every_reader(bag_dir: Path) -> dict:
    """What the independent readers see: rosbags' AnyReader and rosbag2 Reader, and mcap's indexed reader."""
    out = {}
    with AnyReader([bag_dir], default_typestore=typestore()) as reader:
        rows = [(c.topic, t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages()]
        out["any"] = rows
        out["any_count"] = reader.message_count
    with Reader(bag_dir) as reader:
        out["rosbag2"] = [(c.topic, t) for c, t, _ in reader.messages()]
        out["rosbag2_meta"] = (reader.message_count, reader.start_time, reader.duration,
                               {c.topic: c.msgcount for c in reader.connections})
    (file,) = bag_dir.glob("*.mcap")
    with open(file, "rb") as f:
        mcap = make_reader(f, validate_crcs=True)
        summary = mcap.get_summary()
        out["mcap"] = [(channel.topic, message.log_time, message.publish_time)
                       for _, channel, message in mcap.iter_messages()]
        out["mcap_summary"] = summary
    return out


def test_a_finished_bag_is_a_standard_rosbag2_bag_with_every_message(tmp_path):
    points = np.random.default_rng(0).uniform(-0.1, 0.1, (50, 3))
    with TrialBagWriter(tmp_path / "t1", {"object": "tabletop20/cube", "seed": 3}) as bag:
        bag.write("/object/points", m.point_cloud(points, 10), 10)
        bag.write("/camera/image_raw", m.image(np.full((4, 6, 3), 7, np.uint8), 11, "camera_optical"), 11)
        bag.write("/tf", m.tf([("world", "camera_optical", np.eye(4))], 12), 12)
        bag.write("/sim/object_state", m.object_state(np.eye(4), {"link_3.0_tip": 1.5}, False, 13), 13)
        bag.write_json("/trial/outcome", {"success": True})
    back = read_bag(tmp_path / "t1")
    assert back.complete and not back.recovered
    assert back.metadata == {"object": "tabletop20/cube", "seed": 3} and back.outcome == {"success": True}
    np.testing.assert_allclose(m.points_from_cloud(back.topic("/object/points")[0].msg), points, atol=1e-6)
    assert back.topic("/sim/object_state")[0].msg.touching_links == ["link_3.0_tip"]
    assert [x.stamp_ns for x in back.messages[1:5]] == [10, 11, 12, 13]  # the stamps given, as publish time

    seen = read_with_every_reader(tmp_path / "t1")
    assert seen["any_count"] == len(seen["any"]) == len(seen["mcap"]) == 6
    with Reader(tmp_path / "t1") as reader:
        assert {c.topic: c.msgtype for c in reader.connections}["/sim/object_state"] == "getagrip_interfaces/msg/ObjectState"


def test_log_time_is_the_record_time_and_ordered_whatever_the_robot_stamps(tmp_path):
    """Robot stamps jump back; log time (what rosbag2 readers order by) is the record time and never decreases.
    After the clean close every reader sees every message and metadata.yaml has the right counts and times."""
    n = 120
    with TrialBagWriter(tmp_path / "b", {"object": "x"}) as bag:
        for i in range(n):
            bag.write("/joint_states", m.joint_state(("a", "b"), np.array([i, 2.0 * i]), np.zeros(2), robot_stamp(i)),
                      robot_stamp(i))
            if i % 10 == 0:
                bag.write("/sim/object_state", m.object_state(np.eye(4), {}, True, robot_stamp(i)), robot_stamp(i))
            if i % 40 == 0:
                time.sleep(1.2 * FLUSH_INTERVAL_S)  # the next message opens a new chunk
        bag.write_json("/trial/outcome", {"success": False})
    counts = {"/trial/metadata": 1, "/joint_states": n, "/sim/object_state": n // 10, "/trial/outcome": 1}
    total = sum(counts.values())
    assert np.diff([robot_stamp(i) for i in range(n)]).min() < 0  # the stamps do go back

    back = read_bag(tmp_path / "b")
    records = [x.record_time_ns for x in back.messages]
    assert len(back.messages) == total and back.complete
    assert all(a <= b for a, b in zip(records, records[1:]))
    states = back.topic("/joint_states")
    assert [int(s.msg.position[0]) for s in states] == list(range(n))
    assert [s.stamp_ns for s in states] == [robot_stamp(i) for i in range(n)]
    assert [s.msg.header.stamp.sec * 10**9 + s.msg.header.stamp.nanosec for s in states] == [robot_stamp(i) for i in range(n)]

    seen = read_with_every_reader(tmp_path / "b")
    assert [t for _, t, _ in seen["any"]] == records  # rosbags yields them by log time: the write order
    assert [int(msg.position[0]) for topic, _, msg in seen["any"] if topic == "/joint_states"] == list(range(n))
    assert seen["rosbag2"] == [(x.topic, x.record_time_ns) for x in back.messages]
    assert seen["mcap"] == [(x.topic, x.record_time_ns, x.stamp_ns) for x in back.messages]
    stats = seen["mcap_summary"].statistics
    assert stats.message_count == total and stats.chunk_count >= 4 and len(seen["mcap_summary"].chunk_indexes) == stats.chunk_count
    assert (stats.message_start_time, stats.message_end_time) == (records[0], records[-1])

    info = yaml.safe_load((tmp_path / "b" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["message_count"] == total == info["files"][0]["message_count"]
    assert {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]} == counts
    assert info["starting_time"]["nanoseconds_since_epoch"] == records[0]
    assert info["duration"]["nanoseconds"] == records[-1] - records[0] > FLUSH_INTERVAL_S * 1e9
    message_count, start, duration, per_topic = seen["rosbag2_meta"]
    assert (message_count, start, duration, per_topic) == (total, records[0], records[-1] - records[0] + 1, counts)


def test_a_bag_still_being_written_reads_whole_in_its_process(tmp_path):
    """The task scores a trial from its bag before closing it: read_bag flushes the open writer first."""
    bag = TrialBagWriter(tmp_path / "open", {"object": "x"})
    for i in range(30):
        bag.write("/joint_states", m.joint_state(("a",), np.array([float(i)]), np.zeros(1), robot_stamp(i)), robot_stamp(i))
    back = read_bag(tmp_path / "open")
    assert len(back.topic("/joint_states")) == 30 and not back.complete and back.outcome is None
    assert len(read_with_every_reader(tmp_path / "open")["any"]) == 31  # on disk, indexed, without a close
    bag.close()
    assert read_bag(tmp_path / "open").complete


def test_one_bag_per_trial_and_one_type_per_topic(tmp_path):
    with TrialBagWriter(tmp_path / "t", {}) as bag:
        bag.write_json("/trial/events", {"a": 1})
        with pytest.raises(TypeError, match="carries std_msgs/msg/String"):
            bag.write("/trial/events", m.float_array(np.zeros(3)))
    with pytest.raises(FileExistsError):
        TrialBagWriter(tmp_path / "t", {})
    with pytest.raises(RuntimeError, match="closed"):
        bag.write_json("/trial/events", {"a": 2})


WRITER = """
import sys, time, numpy as np
from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter
bag = TrialBagWriter(sys.argv[1], {"object": "x"})
log = open(sys.argv[2], "w", buffering=1)
image = np.zeros((240, 320, 3), np.uint8)
i = 0
while True:
    stamp = %d + i * 10_000_000 - (i %% 5) * 40_000_000
    bag.write("/joint_states", m.joint_state(("a", "b"), np.array([i, 2.0 * i]), np.zeros(2), stamp), stamp)
    log.write(f"{i} {bag.last_record_ns}\\n")  # after write() returned: this message was handed to the writer
    if i %% 20 == 0:
        bag.write("/camera/image_raw", m.image(image, stamp, "camera_optical"), stamp)
    i += 1
    time.sleep(0.002)
""" % ROBOT_T0


def _recover(bag_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "getagrip_ros.cli.getagrip", "trials", "recover", str(bag_dir)],
                          capture_output=True, text=True, timeout=300)


def test_a_writer_killed_while_writing_loses_at_most_the_last_flush_interval(tmp_path):
    """SIGKILL at an arbitrary moment of a steady stream of writes: the bag is readable by every reader as it is
    (or, if the kill landed inside the one write of a chunk, after `getagrip trials recover`); the messages kept are
    exactly the first k written, and the ones lost were all handed over less than FLUSH_INTERVAL_S of record time
    before the last one the writer had returned from."""
    bag_dir, log_path = tmp_path / "crash", tmp_path / "written.txt"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(bag_dir), str(log_path)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not log_path.exists() or log_path.read_text().count("\n") < 400):
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        time.sleep(0.37)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    written = [tuple(map(int, line.split())) for line in log_path.read_text().splitlines(keepends=True)
               if line.endswith("\n")]
    assert len(written) >= 400
    record_of = dict(written)

    back = read_bag(bag_dir)  # reads a crashed bag as it is, whatever state its tail is in
    assert not back.complete and back.outcome is None and back.metadata == {"object": "x"}
    kept = [int(s.msg.position[0]) for s in back.topic("/joint_states")]
    assert kept == list(range(len(kept))) and len(kept) > 0  # nothing missing or out of order
    last_written = written[-1][0]
    lost = list(range(len(kept), last_written + 1))
    if lost:
        lost_span_s = (record_of[last_written] - record_of[lost[0]]) * 1e-9
        assert lost_span_s < FLUSH_INTERVAL_S, f"lost {len(lost)} messages spanning {lost_span_s:.3f} s of record time"
    assert [s.record_time_ns for s in back.topic("/joint_states")] == [record_of[i] for i in kept]

    try:
        seen = read_with_every_reader(bag_dir)
    except Exception:  # noqa: BLE001 - killed inside a chunk's write: the documented repair
        done = _recover(bag_dir)
        assert done.returncode == 0 and "recovered" in done.stdout, done.stderr
        seen = read_with_every_reader(bag_dir)
    states = [int(msg.position[0]) for topic, _, msg in seen["any"] if topic == "/joint_states"]
    assert states == kept  # the standard readers see exactly what read_bag saw
    assert [x[:2] for x in seen["mcap"]] == seen["rosbag2"]
    info = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    per_topic = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    on_disk = {}
    for topic, _ in seen["rosbag2"]:
        on_disk[topic] = on_disk.get(topic, 0) + 1
    assert {k: v for k, v in per_topic.items() if v} == on_disk and info["message_count"] == len(seen["rosbag2"])


IDLE_WRITER = """
import os, signal, sys, time, numpy as np
from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter
bag = TrialBagWriter(sys.argv[1], {"object": "x"})
for i in range(40):
    stamp = %d - i * 1_000_000
    bag.write("/joint_states", m.joint_state(("a", "b"), np.array([i, 2.0 * i]), np.zeros(2), stamp), stamp)
time.sleep(10 * %r)  # no write comes: the writer's flusher puts the open chunk on disk by itself
os.kill(os.getpid(), signal.SIGKILL)
""" % (ROBOT_T0, FLUSH_INTERVAL_S)


def test_a_writer_killed_while_idle_loses_nothing_and_needs_no_repair(tmp_path):
    proc = subprocess.run([sys.executable, "-c", IDLE_WRITER, str(tmp_path / "idle")], capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    back = read_bag(tmp_path / "idle")
    assert not back.complete and back.outcome is None and back.metadata == {"object": "x"}
    assert [list(s.msg.position) for s in back.topic("/joint_states")] == [[i, 2.0 * i] for i in range(40)]
    seen = read_with_every_reader(tmp_path / "idle")  # as it is: no recover needed
    assert seen["any_count"] == len(seen["any"]) == len(seen["mcap"]) == 41
    assert seen["rosbag2_meta"][3] == {"/trial/metadata": 1, "/joint_states": 40}
    assert seen["mcap_summary"].statistics.message_count == 41


def test_recover_rebuilds_a_bag_cut_anywhere(tmp_path):
    """Cut a multi-chunk bag inside each chunk (and fill the rest with garbage, as a torn write leaves it):
    `getagrip trials recover` rewrites it with exactly the whole chunks before the cut, indexed, and a metadata.yaml
    that matches; a bag its writer closed is left alone."""
    source = tmp_path / "full"
    with TrialBagWriter(source, {"object": "x"}) as bag:
        for i in range(60):
            bag.write("/joint_states", m.joint_state(("a",), np.array([float(i)]), np.zeros(1), robot_stamp(i)),
                      robot_stamp(i))
            if i % 15 == 14:
                bag.flush()  # a chunk boundary every 15 messages
    file = source / "full_0.mcap"
    data = file.read_bytes()
    with open(file, "rb") as f:
        chunks = make_reader(f).get_summary().chunk_indexes
    assert len(chunks) >= 5  # /trial/metadata + 4 x 15 joint states (more if the flusher cut one too)

    def messages_in(chunk) -> int:  # counted by the mcap library from the chunk's own bytes
        record = next(iter(StreamReader(io.BytesIO(data[chunk.chunk_start_offset:]), skip_magic=True,
                                        emit_chunks=True).records))
        return sum(isinstance(r, McapMessage) for r in breakup_chunk(record, validate_crc=True))

    before = np.cumsum([0] + [messages_in(c) for c in chunks])  # messages in the chunks before chunk k
    assert before[-1] == 61
    done = _recover(source)
    assert done.returncode == 0 and "nothing to do" in done.stdout and file.read_bytes() == data

    rng = np.random.default_rng(1)
    for k, chunk in enumerate(chunks[1:], start=1):
        kept = int(before[k])
        for garbage in (False, True):
            cut = tmp_path / f"cut_{k}_{garbage}"
            cut.mkdir()
            at = chunk.chunk_start_offset + chunk.chunk_length // 2
            tail = rng.integers(0, 256, len(data) - at, dtype=np.uint8).tobytes() if garbage else b""
            (cut / "cut_0.mcap").write_bytes(data[:at] + tail)
            (cut / "metadata.yaml").write_text((source / "metadata.yaml").read_text().replace("full_0", "cut_0"))
            with pytest.raises(Exception):
                read_with_every_reader(cut)
            crashed = read_bag(cut)
            assert not crashed.complete and len(crashed.messages) == kept

            done = _recover(cut)
            assert done.returncode == 0, done.stderr
            assert f"recovered {cut / 'cut_0.mcap'}: {kept} messages" in done.stdout
            back = read_bag(cut)
            assert back.recovered and not back.complete and back.metadata == {"object": "x"}
            assert [int(s.msg.position[0]) for s in back.topic("/joint_states")] == list(range(kept - 1))
            assert [s.stamp_ns for s in back.topic("/joint_states")] == [robot_stamp(i) for i in range(kept - 1)]
            assert [s.record_time_ns for s in back.messages] == [s.record_time_ns for s in crashed.messages]
            seen = read_with_every_reader(cut)
            assert seen["any_count"] == len(seen["any"]) == len(seen["mcap"]) == kept
            assert seen["rosbag2_meta"][0] == kept == seen["mcap_summary"].statistics.message_count
            again = _recover(cut)
            assert again.returncode == 0 and "nothing to do" in again.stdout
