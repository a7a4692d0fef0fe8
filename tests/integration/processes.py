"""Helpers of the tests that start several processes."""

import socket


def free_port():
    """A TCP port on localhost that no process listens on now."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]
