"""`NodeProcess.wait_for_output` reports a printed text only once its whole line is in the log, so a caller that parses
the line (a host, a result) never reads it half-written."""

import sys
import time

from getagrip_ros.ros.processes import NodeProcess

HALF_A_LINE = """
import os, sys, time
os.write(1, b"HOST")  # unbuffered prints reach the log one piece at a time, like this
time.sleep(5.0)
os.write(1, b" 127.0.0.1\\n")
time.sleep(30)
"""


def test_a_text_is_found_only_with_the_rest_of_its_line(tmp_path):
    with NodeProcess("half", command=[sys.executable, "-c", HALF_A_LINE], log_path=tmp_path / "out") as proc:
        deadline = time.monotonic() + 30
        while "HOST" not in proc.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "HOST" in proc.output()
        assert not proc.wait_for_output("HOST", 0.5)  # printed, but its line is not finished
        assert proc.wait_for_output("HOST", 30), proc.output()
        assert proc.output().split("HOST", 1)[1].split()[0] == "127.0.0.1"


def test_the_last_words_of_a_process_that_exited_count(tmp_path):
    command = [sys.executable, "-c", "import os; os.write(1, b'done without a newline')"]
    with NodeProcess("exits", command=command, log_path=tmp_path / "out") as proc:
        assert proc.wait_for_output("without a newline", 30), proc.output()
        assert not proc.wait_for_output("never printed", 5)


RESERVE = """
import sys, time
from getagrip_ros.ros.processes import reserve_domain_id
print(reserve_domain_id(42), reserve_domain_id(), flush=True)
time.sleep(60)
"""


def test_two_runs_on_one_machine_never_share_a_ros_domain(tmp_path):
    """Each process holds its domain id until it exits; a second one asking for the same id gets another."""
    first = NodeProcess("a", command=[sys.executable, "-c", RESERVE], log_path=tmp_path / "a")
    second = NodeProcess("b", command=[sys.executable, "-c", RESERVE], log_path=tmp_path / "b")
    with first:
        assert first.wait_for_output(" ", 60), first.output()
        a, again = map(int, first.output().split())
        assert a == again and 10 <= a <= 99  # one id per process
        with second:
            assert second.wait_for_output(" ", 60), second.output()
            b = int(second.output().split()[0])
            assert b != a and 10 <= b <= 99
    third = NodeProcess("c", command=[sys.executable, "-c", RESERVE], log_path=tmp_path / "c")
    with third:  # the first two have exited: their ids are free again
        assert third.wait_for_output(" ", 60), third.output()
        assert int(third.output().split()[0]) == a
