"""Loopback addresses for tests of the hardware path (no traffic leaves the machine)."""

import socket

LIBFRANKA_COMMAND_PORT = 1337


def free_loopback_address() -> str:
    """A loopback address where nothing listens on libfranka's command port, from 127.0.0.200 up: franky-sim takes
    the first free one from 127.0.0.1, so a test that needs no robot at its address stays clear of a franky-sim
    that a test on the other worker starts meanwhile."""
    for last in range(200, 255):
        host = f"127.0.0.{last}"
        with socket.socket() as probe:
            try:
                probe.bind((host, LIBFRANKA_COMMAND_PORT))
            except OSError:
                continue
        return host
    raise RuntimeError("no free loopback address")
