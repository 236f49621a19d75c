"""Trial bags: standard rosbag2 (mcap) bags, readable after a crash."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from getagrip_ros.trials import messages as m
from getagrip_ros.trials.bag import TrialBagWriter, read_bag


def test_a_finished_bag_is_a_standard_rosbag2_bag_with_every_message(tmp_path):
    points = np.random.default_rng(0).uniform(-0.1, 0.1, (50, 3))
    with TrialBagWriter(tmp_path / "t1", {"object": "tabletop20/cube", "seed": 3}) as bag:
        bag.write("/object/points", m.point_cloud(points, 10))
        bag.write("/camera/image_raw", m.image(np.full((4, 6, 3), 7, np.uint8), 11, "camera_optical"))
        bag.write("/tf", m.tf([("world", "camera_optical", np.eye(4))], 12))
        bag.write("/sim/object_state", m.object_state(np.eye(4), {"link_3.0_tip": 1.5}, False, 13))
        bag.write_json("/trial/outcome", {"success": True})
    back = read_bag(tmp_path / "t1")
    assert back.complete and back.metadata == {"object": "tabletop20/cube", "seed": 3} and back.outcome == {"success": True}
    np.testing.assert_allclose(m.points_from_cloud(back.topic("/object/points")[0].msg), points, atol=1e-6)
    assert back.topic("/sim/object_state")[0].msg.touching_links == ["link_3.0_tip"]

    from rosbags.rosbag2 import Reader  # an independent reader of the rosbag2 layout (metadata.yaml + mcap)

    with Reader(tmp_path / "t1") as reader:
        assert reader.message_count == 6
        assert {c.topic: c.msgtype for c in reader.connections}["/sim/object_state"] == "getagrip_interfaces/msg/ObjectState"


def test_one_bag_per_trial_and_one_type_per_topic(tmp_path):
    with TrialBagWriter(tmp_path / "t", {}) as bag:
        bag.write_json("/trial/events", {"a": 1})
        with pytest.raises(TypeError, match="carries std_msgs/msg/String"):
            bag.write("/trial/events", m.float_array(np.zeros(3)))
    with pytest.raises(FileExistsError):
        TrialBagWriter(tmp_path / "t", {})


def test_a_killed_writer_leaves_a_readable_bag(tmp_path):
    """The process dies (SIGKILL) mid-trial: every message written before is still there."""
    script = textwrap.dedent(f"""
        import os, signal, numpy as np
        from getagrip_ros.trials import messages as m
        from getagrip_ros.trials.bag import TrialBagWriter
        bag = TrialBagWriter({str(tmp_path / 'crash')!r}, {{"object": "x"}})
        for i in range(25):
            bag.write("/joint_states", m.joint_state(("a", "b"), np.array([i, 2.0 * i]), np.zeros(2), i))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    back = read_bag(tmp_path / "crash")
    assert not back.complete and back.outcome is None and back.metadata == {"object": "x"}
    states = back.topic("/joint_states")
    assert len(states) == 25 and list(states[-1].msg.position) == [24.0, 48.0]
    assert (tmp_path / "crash" / "metadata.yaml").is_file()
