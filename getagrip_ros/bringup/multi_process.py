"""`getagrip bringup --processes per-node`: every node of a profile in its own process, as `ros2 launch` starts them.

Each node runs as ``python -m <its module> --ros-args --params-file config/<node>.yaml --params-file <overrides>``
(the same files and launch arguments as the launch files), its output prefixed with ``[<node>]``. SIGINT or
SIGTERM stops every node (SIGINT, then SIGTERM, then SIGKILL, each after a timeout). A node that exits on its
own is reported; the others keep running, as under `ros2 launch`. Needs no `launch` install (CI runs it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

from getagrip_ros.bringup.description import NodeSpec, profile
from getagrip_ros.bringup.parameters import ros_arguments, write_overrides

STOP_TIMEOUT_S = 20.0
"""Per signal while stopping a node (a loaded 2-core machine has taken over 5 s for a clean shutdown)."""


def _forward(name: str, stream: IO[bytes], out: IO[str], lock: threading.Lock) -> None:
    for raw in iter(stream.readline, b""):
        with lock:
            out.write(f"[{name}] {raw.decode(errors='replace')}")
            out.flush()


class NodeProcesses:
    """The running processes of a profile's nodes."""

    def __init__(self, nodes: tuple[NodeSpec, ...], overrides, env: dict[str, str] | None = None, out: IO[str] = sys.stdout):
        self.nodes, self.out, self._lock = nodes, out, threading.Lock()
        self.processes: dict[str, subprocess.Popen] = {}
        env = {**(env or os.environ), "PYTHONUNBUFFERED": "1"}
        for node in nodes:
            command = [sys.executable, "-m", node.module, *ros_arguments((node,), overrides)]
            # a session of its own: a terminal's Ctrl-C reaches the supervisor, which stops the nodes once
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            self.processes[node.name] = proc
            threading.Thread(target=_forward, args=(node.name, proc.stdout, out, self._lock), daemon=True).start()
        self._reported: set[str] = set()

    def say(self, text: str) -> None:
        with self._lock:
            self.out.write(f"[bringup] {text}\n")
            self.out.flush()

    def check(self) -> bool:
        """Report nodes that exited on their own; True while any node runs."""
        for name, proc in self.processes.items():
            if proc.poll() is not None and name not in self._reported:
                self._reported.add(name)
                self.say(f"{name} exited with code {proc.returncode}")
        return any(p.poll() is None for p in self.processes.values())

    def stop(self) -> dict[str, int]:
        """Stop every node; their exit codes."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            running = [p for p in self.processes.values() if p.poll() is None]
            if not running:
                break
            for p in running:
                p.send_signal(sig)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            for p in running:
                try:
                    p.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    pass
        return {name: p.wait() for name, p in self.processes.items()}


def run_profile_processes(name: str, arguments: dict[str, object] | None = None,
                          extra: dict[str, dict[str, object]] | None = None, stop: threading.Event | None = None) -> int:
    """Start every node of profile `name` in its own process and supervise them until SIGINT/SIGTERM or `stop`;
    returns 0 when every node ended cleanly."""
    prof = profile(name)
    stop = stop or threading.Event()
    overrides = write_overrides(prof, arguments or {}, extra)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    nodes = NodeProcesses(prof.nodes, overrides)
    nodes.say(f"profile {name}: {', '.join(n.name for n in prof.nodes)} running in {len(prof.nodes)} processes "
              f"(parameters: {overrides})")
    try:
        while not stop.wait(0.2) and nodes.check():
            pass
    finally:
        codes = nodes.stop()
    nodes.say(f"stopped: {', '.join(f'{n} {c}' for n, c in codes.items())}")
    return 0 if all(c == 0 for c in codes.values()) else 1
