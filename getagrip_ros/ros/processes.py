"""Start and stop ROS node processes with an isolated environment (loopback only, own domain, temp logs)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


DOMAIN_IDS = range(10, 100)
"""The ROS domain ids runs of this stack take (each run its own, so two bring-ups on one machine never talk)."""
_DOMAIN_LOCKS: dict[int, int] = {}
"""This process's reserved domain id -> its lock file, held open (and locked) until the process exits."""


def reserve_domain_id(preferred: int | None = None) -> int:
    """A ROS domain id that no other process of this stack on this machine holds, kept for this process's life (one
    per process: later calls return it). It is held by an exclusive lock on a file in the temp dir, which the
    operating system releases when the process ends, however it ends. The search starts at `preferred` (default:
    from the process id) and goes up.

    Raises:
        RuntimeError: every id of DOMAIN_IDS is held.
    """
    if _DOMAIN_LOCKS:
        return next(iter(_DOMAIN_LOCKS))
    folder = Path(tempfile.gettempdir()) / "getagrip_ros_domains"
    folder.mkdir(exist_ok=True)
    start = (preferred if preferred is not None else DOMAIN_IDS.start + os.getpid()) - DOMAIN_IDS.start
    for k in range(len(DOMAIN_IDS)):
        domain = DOMAIN_IDS[(start + k) % len(DOMAIN_IDS)]
        fd = os.open(folder / f"{domain}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _DOMAIN_LOCKS[domain] = fd
        return domain
    raise RuntimeError(f"every ROS domain id {DOMAIN_IDS.start}-{DOMAIN_IDS.stop - 1} is held by another run of this "
                       f"stack on this machine (lock files in {folder})")


def isolated_ros_environment(domain_id: int | None = None, log_dir: str | Path | None = None) -> dict[str, str]:
    """A copy of os.environ for ROS processes that stay on loopback, in a domain of this process no other run of the
    stack on this machine uses (`reserve_domain_id`; or `domain_id`), logging to a temp dir."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(domain_id if domain_id is not None else reserve_domain_id())
    env["ROS_LOG_DIR"] = str(log_dir or tempfile.mkdtemp(prefix="getagrip_ros_log_"))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class NodeProcess:
    """A node run as ``python -m <module>`` (or any `command`) in its own process; a context manager that always stops it.

    Stops with SIGINT, then SIGTERM, then SIGKILL, each after a timeout.
    """

    def __init__(self, module: str, args: list[str] | None = None, env: dict[str, str] | None = None,
                 log_path: str | Path | None = None, command: list[str] | None = None,
                 cwd: str | Path | None = None) -> None:
        self.env = env or isolated_ros_environment()
        self.command = command or [sys.executable, "-m", module, *(args or [])]
        self.cwd = cwd
        self.log_path = Path(log_path) if log_path else Path(self.env["ROS_LOG_DIR"]) / f"{module.rsplit('.', 1)[-1]}.out"
        self.process: subprocess.Popen | None = None

    def start(self) -> NodeProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command, env=self.env, cwd=self.cwd, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def wait_for_output(self, text: str, timeout_s: float = 30.0) -> bool:
        """Wait until the process has printed `text` in a whole line (its newline written too, so a line is never read
        half-written: unbuffered prints reach the log one piece at a time); False on timeout or if it exited first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            output = self.output()
            if text in output[: output.rfind("\n") + 1]:
                return True
            if self.process is not None and self.process.poll() is not None:
                return text in self.output()
            time.sleep(0.1)
        return False

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """Stop the process; returns its exit code. `timeout_s` per signal: a node's clean shutdown has taken
        over 5 s on a loaded 2-core CI machine."""
        if self.process is None:
            return None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.process.returncode

    def __enter__(self) -> NodeProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
