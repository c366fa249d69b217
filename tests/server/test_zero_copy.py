"""Arena batches of a memory log go to the socket by reference to their pages.

A read of batches kept in a memory log's arenas is ``spliceable``: both kinds of
server connection (the asyncio protocol's, and SocketIO's under trio) hand their
pages to a pipe (vmsplice, from the extension kafkette.server.net._splice) and splice
them to the socket, where other views are copied by ``sendmsg``, never joined.
These tests read such answers slowly over real sockets and compare them with
the disk log's (sendfile) answer; they need the extension built, and fail
without it rather than skip.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from kafkette.backends import memory
from kafkette.backends.types import LogSlice
from kafkette.server.net import _splice, zero_copy
from kafkette.server.net.asyncio_connection import ConnectionProtocol
from kafkette.server.net.zero_copy import SplicePipe
from tests.server.test_direct_write import (
    FETCH,
    LOGGER,
    PIPELINED,
    VALUES,
    batch,
    broker_with_records,
    count_calls,
    frame,
    leave_mid_answer,
    read_frames_slowly,
    serving,
    small_send_buffers,
)

STORED_BYTES = sum(len(batch(value)) for value in VALUES)


@pytest.fixture
def every_batch_in_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "ARENA_FROM", 0)


@pytest.fixture
def disk_answer(tmp_path: Path) -> list[bytes]:
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    return serving(broker_with_records(tmp_path / "data"), read)


def spy_on_pipes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """Bytes each vmsplice took, and the ``held`` bytes of each pipe closed."""
    taken: list[int] = []
    closed_holding: list[int] = []
    real_fill, real_close = SplicePipe.fill, SplicePipe.close

    def fill(self: SplicePipe, buffers: Any) -> int:
        taken.append(real_fill(self, buffers))
        return taken[-1]

    def close(self: SplicePipe) -> None:
        closed_holding.append(self.held)
        real_close(self)

    monkeypatch.setattr(SplicePipe, "fill", fill)
    monkeypatch.setattr(SplicePipe, "close", close)
    return taken, closed_holding


def spy_on_sendmsg(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes each sendmsg sent."""
    handed: list[int] = []
    real = socket.socket.sendmsg

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        handed.append(real(self, buffers, *args))
        return handed[-1]

    monkeypatch.setattr(socket.socket, "sendmsg", sendmsg)
    return handed


def test_the_extension_is_built_here() -> None:
    assert zero_copy.AVAILABLE
    assert zero_copy._vmsplice is _splice.vmsplice


@pytest.mark.usefixtures("every_batch_in_arenas")
def test_an_arena_answer_read_slowly_is_spliced_and_byte_identical_to_the_disk_one(
    monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes]
) -> None:
    """Every stored byte goes through a pipe, none through sendmsg (which sends only
    the answer's own bytes before them); the pipelined answers come in order, the
    socket was full at times, and the pipe is kept, empty, for the next answer."""
    small_send_buffers(monkeypatch)
    waits = count_calls(monkeypatch, ConnectionProtocol, "_wait_writable")
    taken, closed_holding = spy_on_pipes(monkeypatch)
    handed = spy_on_sendmsg(monkeypatch)
    zero_copy._idle.clear()

    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    from_memory = serving(broker_with_records(None), read)

    assert from_memory == disk_answer
    assert sum(taken) == STORED_BYTES and len(taken) > 1  # more than one pipe's worth
    assert sum(handed) == 4 + len(from_memory[1]) - STORED_BYTES
    assert len(waits) > 0
    assert closed_holding == []
    assert [pipe.held for pipe in zero_copy._idle] == [0]


@pytest.mark.usefixtures("every_batch_in_arenas")
def test_pages_the_kernel_refuses_are_copied_with_sendmsg(
    monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes]
) -> None:
    def refuse(self: SplicePipe, buffers: Any) -> int:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    small_send_buffers(monkeypatch)
    monkeypatch.setattr(SplicePipe, "fill", refuse)
    handed = spy_on_sendmsg(monkeypatch)
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    assert serving(broker_with_records(None), read) == disk_answer
    assert sum(handed) == 4 + len(disk_answer[1])


@pytest.mark.usefixtures("every_batch_in_arenas")
def test_without_the_extension_arena_answers_go_by_sendmsg(
    monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes]
) -> None:
    monkeypatch.setattr(zero_copy, "AVAILABLE", False)
    taken, _ = spy_on_pipes(monkeypatch)
    handed = spy_on_sendmsg(monkeypatch)
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    assert serving(broker_with_records(None), read) == disk_answer
    assert taken == []
    assert sum(handed) == 4 + len(disk_answer[1])


@pytest.mark.usefixtures("every_batch_in_arenas")
def test_a_client_gone_in_the_middle_of_a_spliced_answer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The client reads 64 KiB and closes: one INFO line, the pipe (still holding
    pages) closed rather than kept, and the next client served."""
    caplog.set_level(logging.DEBUG)
    small_send_buffers(monkeypatch)
    taken, closed_holding = spy_on_pipes(monkeypatch)
    zero_copy._idle.clear()

    def client(port: int) -> int:
        leave_mid_answer(port, caplog)
        answers = read_frames_slowly(port, frame(FETCH, 12, 7), 1)
        return int.from_bytes(answers[0][:4], "big")

    assert serving(broker_with_records(None), client) == 7
    (line,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert line.endswith(" went away in the middle of an answer")
    assert sum(taken) > 0
    assert len(closed_holding) == 1 and closed_holding[0] > 0
    assert [pipe.held for pipe in zero_copy._idle] == [0]  # the second answer's


@pytest.mark.usefixtures("every_batch_in_arenas")
def test_without_a_descriptor_to_watch_the_pipe_and_the_rest_go_to_the_transport(
    monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes]
) -> None:
    """os.dup failing while the socket is full: what the pipe holds is read back and
    handed to the transport before the rest of the answer, in order."""

    def no_descriptor(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    small_send_buffers(monkeypatch)
    monkeypatch.setattr(os, "dup", no_descriptor)
    taken, closed_holding = spy_on_pipes(monkeypatch)
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    assert serving(broker_with_records(None), read) == disk_answer
    assert 0 < sum(taken) < STORED_BYTES
    assert closed_holding == []


def test_pipes_are_kept_only_when_empty_and_a_few() -> None:
    zero_copy._idle.clear()
    pipes = [zero_copy.take_pipe() for _ in range(zero_copy.IDLE_PIPES + 2)]
    assert all(isinstance(p, SplicePipe) for p in pipes)
    assert len({p.read_fd for p in pipes if p is not None}) == len(pipes)
    data = memoryview(bytes(range(256)) * 64).toreadonly()
    first = pipes[0]
    assert first is not None
    assert first.fill([data[:1000], data[1000:]]) == len(data) and first.held == len(data)
    zero_copy.give_back(first)  # holding bytes: closed
    with pytest.raises(OSError):
        os.fstat(first.read_fd)
    for pipe in pipes[1:]:
        assert pipe is not None
        zero_copy.give_back(pipe)
    assert len(zero_copy._idle) == zero_copy.IDLE_PIPES
    again = zero_copy.take_pipe()
    assert again is pipes[zero_copy.IDLE_PIPES]


def test_a_pipe_gives_back_what_it_holds() -> None:
    pipe = SplicePipe()
    try:
        data = b"".join(bytes([i]) * 5000 for i in range(10))
        assert pipe.fill([memoryview(data)]) == len(data)
        assert pipe.take_back() == data and pipe.held == 0
    finally:
        pipe.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("in_arenas", [True, False])
def test_socket_connections_send_stored_views_unjoined(
    monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes], backend: str, in_arenas: bool
) -> None:
    """Served by SocketIO (under trio, or asyncio when asked): arena batches go through a
    pipe, other stored views with sendmsg, never joined into one bytes; the answers are
    the disk log's, byte for byte, read slowly."""
    if in_arenas:
        monkeypatch.setattr(memory, "ARENA_FROM", 0)
    taken, closed_holding = spy_on_pipes(monkeypatch)
    handed = spy_on_sendmsg(monkeypatch)
    monkeypatch.setattr(LogSlice, "to_bytes", None)  # (a join would fail loudly)
    zero_copy._idle.clear()

    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    answer = serving(broker_with_records(None), read, connections="socket", backend=backend)

    assert answer == disk_answer
    if in_arenas:
        assert sum(taken) == STORED_BYTES and sum(handed) == 0
    else:
        assert taken == [] and sum(handed) == STORED_BYTES
    assert closed_holding == []
