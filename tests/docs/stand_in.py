"""The ``kafkette`` stand-in of tests/docs/zygote.py: it runs with ``python -S`` and
imports only a few modules of the standard library, to start in milliseconds."""

import json
import os
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")
"""The request's length, before the request (JSON)."""
STANDARD_FDS = [0, 1, 2]
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def stand_in(socket_path: str) -> int:
    """Run ``kafkette ARGS`` in the zygote listening at ``socket_path``; its exit status."""
    request = json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)})
    data = request.encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(socket_path)
        socket.send_fds(connection, [HEADER.pack(len(data)) + data], STANDARD_FDS)
        answers = connection.makefile("rb")
        child = int(answers.readline())
        for signum in _FORWARDED:  # Ctrl-C and the like reach the command
            signal.signal(signum, lambda signum, _: os.kill(child, signum))
        status = answers.readline()
    if not status:
        print(f"kafkette (pid {child}) ended without an exit status", file=sys.stderr)
        return 255
    return int(status)
