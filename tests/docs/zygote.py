"""A ``kafkette`` command without the second of start-up each time, for the shell examples.

Importing kafkette takes about a second, most of a short command's time; the
shell examples run some fifty commands. So the docs' tests put first on PATH a
``kafkette`` that is a stand-in (:func:`write_stand_in`): a small Python script
(no site-packages: a few milliseconds) that hands its arguments, environment,
current directory and standard input, output and error (the file descriptors
themselves) to a :class:`Zygote`, a process that imported ``kafkette.cli``
once. The zygote forks a child per command, which takes over those descriptors
and runs ``kafkette.cli.main`` as the ``kafkette`` console script does; its
exit status goes back to the stand-in, which exits with it. Ctrl-C and the
other signals the stand-in receives are passed on to the child, so a following
``kafkette consume`` stops as in a terminal. Each child starts from the zygote,
never from another command, so commands share nothing.

``KAFKETTE_DOCS_NO_ZYGOTE=1`` turns this off: every command then starts the
real console script.

The stand-in's code is tests/docs/stand_in.py.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from tests.docs.stand_in import HEADER, STANDARD_FDS


def enabled() -> bool:
    return os.environ.get("KAFKETTE_DOCS_NO_ZYGOTE", "") != "1"


class Zygote:
    """The process that forks a ``kafkette`` per command, and the directory of its socket
    and of the stand-in script (put it first on PATH)."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="kafkette-docs-"))
        self.socket_path = self.directory / "zygote.sock"
        self.bin = self.directory / "bin"
        self.bin.mkdir()
        write_stand_in(self.bin / "kafkette", self.socket_path)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.docs.zygote", str(self.socket_path)],
            cwd=Path(__file__).parents[2],
            stdin=subprocess.PIPE,  # closed when the tests end, however: then it exits
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            self.close()
            raise RuntimeError("the kafkette zygote did not start")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        for path in (self.bin / "kafkette", self.socket_path):
            path.unlink(missing_ok=True)
        self.bin.rmdir()
        self.directory.rmdir()


def write_stand_in(path: Path, socket_path: Path) -> None:
    """The ``kafkette`` script that runs its command in the zygote at ``socket_path``."""
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import stand_in\n"
        f"sys.exit(stand_in.stand_in({str(socket_path)!r}))\n"
    )
    path.chmod(0o755)


# -- the zygote ---------------------------------------------------------------------------


def serve(socket_path: str) -> None:
    """Import kafkette's command, then fork a child per connection, forever."""
    _import_kafkette()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable:  # the tests are gone
            return
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _child(connection)
        connection.close()


def _import_kafkette() -> None:
    """Import what the commands may: the command line's parser (which imports every
    subcommand's and the broker's modules) and every module of the package but those
    that run something, need an extra or pytest."""
    import importlib
    import pkgutil

    import kafkette
    from kafkette.cli import build_parser

    build_parser()
    for module in pkgutil.walk_packages(kafkette.__path__, "kafkette."):
        name = module.name
        if not any(part in name for part in ("__main__", "demo", "spark_integration", "testing")):
            importlib.import_module(name)
    gc.freeze()  # the children leave these objects alone: fewer pages copied


def _child(connection: socket.socket) -> None:
    """Become the command: its descriptors, directory and environment; run it and exit as
    the interpreter does (threads joined, then the exit status reported, at exit)."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        request, fds = _receive(connection)
        for fd, standard in zip(fds, STANDARD_FDS, strict=True):
            os.dup2(fd, standard)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["kafkette", *request["argv"]]
        connection.sendall(f"{os.getpid()}\n".encode())
        status = _run_kafkette()
    except BaseException:
        traceback.print_exc()
    atexit.register(connection.sendall, f"{status}\n".encode())
    sys.exit(status)


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, len(STANDARD_FDS))
    (size,) = HEADER.unpack(data[: HEADER.size])
    body = data[HEADER.size :]
    while len(body) < size:
        more = connection.recv(size - len(body))
        if not more:
            raise EOFError("the stand-in went away")
        body += more
    return json.loads(body), fds


def _run_kafkette() -> int:
    """``sys.exit(kafkette.cli.main())`` as the console script, its status as a number."""
    from kafkette.cli import main

    try:
        code: object = main()
    except SystemExit as exit:
        code = exit.code
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # as the interpreter at exit: status 120
            code = 120
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    serve(sys.argv[1])
