"""In-process clusters: ``memory://NAME`` and ``file:///path``.

The one place where the client package meets the broker core. A cluster
named in ``bootstrap_servers`` is a :class:`~kafkette.server.Broker` living
in this process: ``memory://NAME`` over the memory backend, shared by every
client of that name; ``file:///path`` over the disk backend, with the data
directory locked against other processes. ``file:///path?mode=ro`` opens the
directory read-only (what the ``kafkette`` command does with ``-b file://``):
nothing there is written, requests that would write are refused
(:mod:`kafkette.server.data_dir.read_only`), and any number of read-only openings
share the directory while no broker holds it.

The broker core runs in one event loop of its own (a daemon thread), so
clients in any loop or thread (an async client in a test's event loop, a
sync client's background thread) reach the same broker state. A client's
connection to it is an :class:`InProcessStream`: the same Kafka frames as
over TCP, encoded and decoded by the same code, handed across without a
socket. ``send()`` serves each complete request before it returns; the
responses wait in the stream for ``receive()``. A request is handed to the
broker's loop as a task and its answer wakes the caller's loop: no thread
waits for it, and a cancelled caller returns at once.

A cluster made to serve on its owner's event loop (``async with
MemoryCluster(in_loop=True)``) has no thread: a :class:`LoopHome` runs the
broker core as tasks of the loop that entered it (the timers, the
maintenance loop, one task per request, no worker thread). Nothing of the
broker then waits outside that loop, so a loop with a fake clock (trio's
``MockClock(autojump_threshold=0)``) sees the broker's waits as it sees the
clients': it moves its clock only when clients and broker are all idle, and
then to the earliest deadline of either. Only tasks of that loop may connect:
a client in another thread (a sync client's background loop) would wait for
a loop that its caller may be blocking.

A cluster made with several nodes (``MemoryCluster(brokers=N)``) has one
broker core whose :class:`~kafkette.server.nodes.NodeTable` routes requests:
a stream is opened to one node (the client picks it from the metadata's
node id; the bootstrap connection reaches the first live node), and each of
its requests is served as that node (:data:`~kafkette.server.nodes.serving_node`).
A stopped node refuses new streams and drops its open ones.

A stream that ends (closed by its client, dropped with its node, or closed by the
broker after bad bytes) tells the broker, as a socket's end does
(:meth:`~kafkette.server.Broker.connection_closed`: the share sessions it opened end and
their members' records go back), after the requests it sent were served. Each stream is
its own connection there: its requests carry a key of their own
(:data:`~kafkette.server.share.sessions.connection_key`), since all of them come from the
cluster's URL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import itertools
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.abc

from kafkette.client.events import event_factory, threadsafe_call_soon_factory
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.clocks import WallClockMs, wall_ms
from kafkette.errors import KafkaConnectionError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.framing import FrameDecoder
from kafkette.server import Broker, BrokerConfig
from kafkette.server.data_dir.lock import DataDirLock
from kafkette.server.net.frames import process_frame
from kafkette.server.net.listener import CloseConnection
from kafkette.server.nodes import numbered_nodes, serving_node
from kafkette.server.share.sessions import connection_key

T = TypeVar("T")

MEMORY_SCHEME = "memory://"
FILE_SCHEME = "file://"


def is_in_process(server: str) -> bool:
    return server.startswith((MEMORY_SCHEME, FILE_SCHEME))


class InProcessCluster:
    """A broker core running in this process: in its own event loop thread, or with
    ``in_loop`` on the loop that calls :meth:`enter_loop` (see :class:`LoopHome`)."""

    def __init__(
        self,
        url: str,
        broker_factory: Callable[[], Broker],
        lock: DataDirLock | None,
        nodes: int = 1,
        *,
        in_loop: bool = False,
    ) -> None:
        self.url = url
        self._lock = lock
        self._loop = None if in_loop else BackgroundLoop(f"kafkette {url}")
        self._home: LoopHome | None = None
        """The broker's tasks on its owner's loop (``in_loop``, between enter and exit)."""
        self.closed = False
        self.broker = broker_factory()
        if nodes > 1:
            config = self.broker.config
            self.broker.nodes = numbered_nodes(
                [(config.advertised[0], node) for node in range(1, nodes + 1)],
                config.overrides.get("broker.rack"),
                config.overrides.get("replica.selector.class"),
            )
        self._streams: weakref.WeakSet[InProcessStream] = weakref.WeakSet()
        self._max_frame = self.broker.config.socket_request_max_bytes
        self._in_flight: set[concurrent.futures.Future[list[bytes]]] = set()
        """Requests handed to the broker's loop and not answered yet."""
        self.connections = StreamEnds(self.broker)
        self._stream_keys = itertools.count(1)
        if self._loop is not None:
            self._broker_loop = self._loop.call(_running_loop)
            self._loop.call_soon(self.broker.run_background)

    @property
    def in_loop(self) -> bool:
        """Whether the broker is served on its owner's event loop (no thread of its own)."""
        return self._loop is None

    async def enter_loop(self) -> None:
        """Start serving on the running event loop (a cluster made with ``in_loop``)."""
        if self._loop is not None or self._home is not None or self.closed:
            raise RuntimeError(f"{self.url} cannot start serving on this event loop")
        self._home = await LoopHome.open(self.broker, self.url, self.connections)

    async def exit_loop(self) -> None:
        """Stop serving on the event loop: the broker's tasks and requests in flight end."""
        home, self._home = self._home, None
        if home is not None:
            await home.aclose()

    async def serve_frame(
        self, frame: memoryview, node: int | None = None, connection: str | None = None
    ) -> Sequence[Any]:
        """Serve one request frame in the broker's loop as ``node`` (None: the only
        node), from the stream ``connection``; returns the response frame's parts.

        The caller's task waits without a thread. Cancelled, it returns at once:
        the broker finishes the request (a long-poll Fetch its wait) and the
        answer is dropped, as when a client closes its socket. A node stopped
        before the answer drops it too."""
        if self.closed:
            raise anyio.BrokenResourceError(f"{self.url} is closed")
        nodes = self.broker.nodes
        if not nodes.is_live(node):
            raise anyio.BrokenResourceError(f"node {node} of {self.url} is stopped")
        data = bytes(frame)  # the caller's buffer may be reused once we return
        if self._loop is None:
            home = self._home
            if home is None:
                raise anyio.BrokenResourceError(f"{self.url} is not serving")
            parts = await home.serve(data, node, connection)
        else:
            parts = await self._serve_across(data, node, connection)
        if not nodes.is_live(node):
            raise anyio.BrokenResourceError(f"node {node} of {self.url} stopped")
        return parts

    async def _serve_across(
        self, data: bytes, node: int | None, connection: str | None
    ) -> list[bytes]:
        """Serve ``data`` in the broker's own loop thread; wake the caller with its answer."""
        done = event_factory()()
        wake = threadsafe_call_soon_factory()
        answer: concurrent.futures.Future[list[bytes]] = concurrent.futures.Future()

        def wake_caller(_: object) -> None:
            self._in_flight.discard(answer)
            # RuntimeError: the caller's event loop has ended meanwhile (nobody waits).
            with contextlib.suppress(RuntimeError):
                wake(done.set)

        answer.add_done_callback(wake_caller)
        self._in_flight.add(answer)
        try:
            # A plain task of the broker's asyncio loop: anyio's portal (a task group
            # spawn per request) cost more than serving a small request. Started in an
            # empty context (but for the node served): the caller's context variables
            # (sniffio's "trio") are not the broker's.
            context = contextvars.Context()
            if node is not None:
                context.run(serving_node.set, node)
            context.run(connection_key.set, connection)
            self._broker_loop.call_soon_threadsafe(
                self._start, data, answer, connection, context=context
            )
        except RuntimeError:  # the loop stopped meanwhile
            answer.cancel()
        await done.wait()
        try:
            return answer.result()
        except concurrent.futures.CancelledError:  # the cluster closed under the request
            raise anyio.BrokenResourceError(f"{self.url} is closed") from None

    def _start(
        self,
        data: bytes,
        answer: concurrent.futures.Future[list[bytes]],
        connection: str | None,
    ) -> None:
        """In the broker's loop: serve ``data`` in a task of its own, its outcome to ``answer``."""
        if not answer.set_running_or_notify_cancel():
            return  # the cluster closed before the request started
        self.connections.started(connection)

        def finished(task: asyncio.Task[list[bytes]]) -> None:
            self.connections.finished(connection)
            if task.cancelled():  # the cluster's loop is shutting down
                answer.set_exception(anyio.BrokenResourceError(f"{self.url} is closed"))
            elif (error := task.exception()) is not None:
                answer.set_exception(error)
            else:
                answer.set_result(task.result())

        self._broker_loop.create_task(self._serve(data)).add_done_callback(finished)

    async def _serve(self, data: bytes) -> list[bytes]:
        parts = await process_frame(self.broker, memoryview(data), self.url)
        return [bytes(p) for p in parts]

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``func(*args)`` in the broker's event loop and wait for its result (from
        another thread: tests reading or driving the broker core). Not for a cluster
        served on its owner's loop: see :meth:`run`."""
        if self.closed:
            raise RuntimeError(f"{self.url} is closed")
        if self._loop is None:
            raise RuntimeError(f"{self.url} is served on its owner's event loop: use run()")
        return self._loop.call(func, *args)

    def run(self, func: Callable[..., T], *args: Any) -> T:
        """Call ``func(*args)`` where the broker's state may be touched, and return its
        result: in the broker's own loop thread (waiting for it), or, for a cluster
        served on its owner's loop, right here in that loop's thread."""
        if self.closed:
            raise RuntimeError(f"{self.url} is closed")
        if self._loop is not None:

            async def call() -> T:
                return func(*args)

            return self._loop.call(call)
        if self._home is not None and not self._home.in_its_thread():
            raise RuntimeError(
                f"{self.url} is served on the event loop that entered it "
                "(MemoryCluster(in_loop=True)): call it from that loop's thread"
            )
        return func(*args)

    def stream_ended(self, connection: str) -> None:
        """The stream ``connection`` ended (from any thread): the broker hears of it
        after the stream's requests were served."""
        if self.closed:
            return
        if self._loop is None:
            if self._home is not None:
                self.connections.ended(connection)
            return
        with contextlib.suppress(RuntimeError):  # the broker's loop has stopped
            self._broker_loop.call_soon_threadsafe(self.connections.ended, connection)

    def new_connection(self) -> str:
        """A key for a new stream's requests."""
        return f"{self.url}#{next(self._stream_keys)}"

    def open_stream(self, node: int | None = None) -> InProcessStream:
        """A new connection to ``node`` (None: the bootstrap connection, to the first
        live node). :class:`~kafkette.errors.KafkaConnectionError` when the node is
        stopped or not in the cluster, or when the cluster is served on an event
        loop other than the caller's."""
        if self._loop is None:
            if self._home is None:
                raise KafkaConnectionError(
                    f"{self.url} is not serving: enter its MemoryCluster with async with"
                )
            self._home.refuse_other_threads()
        nodes = self.broker.nodes
        if not nodes.multi:
            return InProcessStream(self)
        if node is None or node < 0:
            live = nodes.live()
            if not live:
                raise KafkaConnectionError(f"every node of {self.url} is stopped")
            node = live[0]
        if node not in nodes.addresses:
            raise KafkaConnectionError(f"{self.url} has no node {node}")
        if not nodes.is_live(node):
            raise KafkaConnectionError(f"node {node} of {self.url} is stopped")
        stream = InProcessStream(self, node)
        self._streams.add(stream)
        return stream

    def drop_connections(self, node: int) -> None:
        """Close every open stream to ``node`` (it was stopped), from any thread."""
        for stream in list(self._streams):
            if stream.node == node:
                stream.drop()

    def close(self) -> None:
        self.closed = True
        if self._loop is not None:
            self._loop.close()
        elif self._home is not None:  # the tasks end at exit_loop
            self._home.cancel()
        for answer in list(self._in_flight):  # never started: the loop stopped first
            answer.cancel()
        self.broker.close()
        if self._lock is not None:
            self._lock.release()


class StreamEnds:
    """The requests of each stream being served, so that the broker hears of a stream's
    end after its last request (as of a socket's, after the requests read from it).
    Used in the broker's loop only."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._serving: dict[str, int] = {}
        self._ended: set[str] = set()
        """Streams that ended while requests of theirs were served."""

    def started(self, connection: str | None) -> None:
        if connection is not None:
            self._serving[connection] = self._serving.get(connection, 0) + 1

    def finished(self, connection: str | None) -> None:
        if connection is None:
            return
        left = self._serving.pop(connection, 1) - 1
        if left:
            self._serving[connection] = left
        elif connection in self._ended:
            self._ended.discard(connection)
            self._broker.connection_closed(connection)

    def ended(self, connection: str) -> None:
        if connection in self._serving:
            self._ended.add(connection)
        else:
            self._broker.connection_closed(connection)


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


class LoopHome:
    """A broker core's tasks on the running event loop, from :meth:`open` to :meth:`aclose`."""

    def __init__(
        self,
        broker: Broker,
        url: str,
        task_group: anyio.abc.TaskGroup,
        connections: StreamEnds | None = None,
    ) -> None:
        self._broker = broker
        self._url = url
        self.connections = connections or StreamEnds(broker)
        self._tasks = task_group
        self._thread = threading.get_ident()
        self._event = event_factory()
        self._cancelled = anyio.get_cancelled_exc_class()

    @classmethod
    async def open(
        cls, broker: Broker, url: str, connections: StreamEnds | None = None
    ) -> LoopHome:
        """Start ``broker``'s timers on the running loop; its requests are served there."""
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        home = cls(broker, url, tasks, connections)
        tasks.start_soon(broker.run_background)
        return home

    def cancel(self) -> None:
        """Cancel the timers and the requests in flight (their callers get an error)."""
        self._tasks.cancel_scope.cancel()

    async def aclose(self) -> None:
        """:meth:`cancel`, and wait for the tasks to end."""
        self.cancel()
        await self._tasks.__aexit__(None, None, None)

    def in_its_thread(self) -> bool:
        """Whether the caller runs in the thread of the loop serving the broker."""
        return threading.get_ident() == self._thread

    def refuse_other_threads(self) -> None:
        """:class:`~kafkette.errors.KafkaConnectionError` unless called in the loop's thread."""
        if not self.in_its_thread():
            raise KafkaConnectionError(
                f"{self._url} is served on the event loop that entered it "
                "(MemoryCluster(in_loop=True)): connect from that loop; sync clients "
                "and other threads need a MemoryCluster without in_loop"
            )

    async def serve(self, data: bytes, node: int | None, connection: str | None) -> Sequence[Any]:
        """Serve one request frame as ``node``, from the stream ``connection``, in a task of
        its own; the response's parts.

        Cancelled, the caller returns at once: the task finishes the request
        (a long-poll Fetch its wait) and its answer is dropped, as when a client
        closes its socket."""
        done = self._event()
        outcome: list[Sequence[Any] | BaseException] = []
        self.connections.started(connection)
        self._tasks.start_soon(self._serve, data, node, connection, done, outcome)
        await done.wait()
        result = outcome[0]
        if isinstance(result, self._cancelled):  # the cluster closed under the request
            raise anyio.BrokenResourceError(f"{self._url} is closed")
        if isinstance(result, BaseException):
            raise result
        return result

    async def _serve(
        self,
        data: bytes,
        node: int | None,
        connection: str | None,
        done: anyio.Event,
        outcome: list[Sequence[Any] | BaseException],
    ) -> None:
        if node is not None:
            serving_node.set(node)  # in this task's own context
        connection_key.set(connection)
        try:
            parts = await process_frame(self._broker, memoryview(data), self._url, offload=False)
            outcome.append(parts)
        except self._cancelled as exc:
            outcome.append(exc)
            raise
        except Exception as exc:  # the caller's (a connection to close, a broker bug)
            outcome.append(exc)
        finally:
            self.connections.finished(connection)
            done.set()


class InProcessStream(anyio.abc.ByteStream):
    """A client's byte stream to an in-process broker."""

    def __init__(self, cluster: InProcessCluster, node: int | None = None) -> None:
        self._cluster = cluster
        self.node = node
        """The node this stream reached (None: the cluster has one node)."""
        self.connection = cluster.new_connection()
        """The key its requests carry (the broker's name for this connection)."""
        self._told = False
        self._decoder = FrameDecoder(cluster._max_frame)
        self._pending = bytearray()
        self._ready = anyio.Event()
        self._closed = False
        self._wake: Callable[[Callable[[], object]], object] | None = None
        if node is not None:
            with contextlib.suppress(RuntimeError):  # made outside an event loop
                self._wake = threadsafe_call_soon_factory()

    def drop(self) -> None:
        """Close the stream from any thread, as a broker going away does."""
        if self._wake is None:
            self._closed = True
            self._tell_ended()
            return
        with contextlib.suppress(RuntimeError):  # the stream's event loop has ended
            self._wake(self._drop_now)

    def _drop_now(self) -> None:
        self._closed = True
        self._ready.set()
        self._tell_ended()

    def _tell_ended(self) -> None:
        """Tell the broker this connection ended (once)."""
        if not self._told:
            self._told = True
            self._cluster.stream_ended(self.connection)

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._decoder.feed(item)
            while (frame := self._decoder.next_frame()) is not None:
                for part in await self._cluster.serve_frame(frame, self.node, self.connection):
                    self._pending += part
                self._ready.set()
        except (CloseConnection, ProtocolError, anyio.BrokenResourceError):
            # The broker closes a connection that sent bad bytes, as over TCP.
            self._closed = True
            self._ready.set()
            self._tell_ended()
            raise anyio.BrokenResourceError from None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._pending:
            if self._closed:
                raise anyio.EndOfStream
            self._ready = anyio.Event()
            await self._ready.wait()
        chunk = bytes(self._pending[:max_bytes])
        del self._pending[:max_bytes]
        return chunk

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._ready.set()
        self._tell_ended()


_clusters: dict[str, InProcessCluster] = {}
_refused: set[str] = set()
"""Clusters closed by their owner (``MemoryCluster.close()``): new clients get an error."""
_clusters_lock = threading.Lock()


def get_cluster(
    url: str, config: BrokerConfig | None = None, clock: WallClockMs | None = None
) -> InProcessCluster:
    """The in-process cluster for ``memory://NAME`` or ``file:///path``, created on first use
    (with ``config`` and ``clock``, which are ignored when it exists already)."""
    with _clusters_lock:
        cluster = _clusters.get(url)
        if cluster is None:
            if url in _refused:
                raise KafkaConnectionError(
                    f"{url} is closed: its MemoryCluster was closed (make a new one)"
                )
            cluster = _create(url, config or BrokerConfig(), clock or wall_ms)
            _clusters[url] = cluster
        return cluster


def create_cluster(
    url: str, config: BrokerConfig, clock: WallClockMs, *, nodes: int = 1, in_loop: bool = False
) -> InProcessCluster:
    """A new in-process cluster ``url``; an error if one of that name is open.

    With ``nodes`` > 1 (``memory://`` only) the broker core stands for nodes 1..N,
    advertised as ``memory-NAME`` with the node id as port. With ``in_loop``
    (``memory://`` only) it has no thread: it serves once entered on an event
    loop (:meth:`InProcessCluster.enter_loop`)."""
    with _clusters_lock:
        if url in _clusters:
            raise ValueError(f"{url} exists already")
        _refused.discard(url)
        cluster = _clusters[url] = _create(url, config, clock, nodes, in_loop=in_loop)
        return cluster


def _create(
    url: str, config: BrokerConfig, clock: WallClockMs, nodes: int = 1, *, in_loop: bool = False
) -> InProcessCluster:
    if url.startswith(MEMORY_SCHEME):
        name = url[len(MEMORY_SCHEME) :]
        config.advertised_host, config.advertised_port = f"memory-{name}", 0
        config.data_dir = None
        return InProcessCluster(
            url, lambda: Broker(config, clock=clock), None, nodes, in_loop=in_loop
        )
    if in_loop:
        raise ValueError(f"{url!r}: serving on the caller's event loop is for memory:// only")
    if nodes != 1:
        raise ValueError(f"{url!r}: several nodes are simulated over memory:// only")
    path, read_only = _data_dir(url)
    lock = DataDirLock(path, f"kafkette in-process broker {url}", shared=read_only)
    config.advertised_host, config.advertised_port = "file", 0
    config.data_dir = path
    config.read_only = read_only
    try:
        return InProcessCluster(url, lambda: Broker(config, clock=clock), lock)
    except BaseException:
        lock.release()
        raise


def _data_dir(url: str) -> tuple[str, bool]:
    """The directory of ``file:///path[?mode=ro|rw]`` and whether it is opened read-only."""
    path, _, query = url[len(FILE_SCHEME) :].partition("?")
    if not path.startswith("/"):
        raise ValueError(f"{url!r}: a file:// cluster needs an absolute path (file:///path)")
    if query not in ("", "mode=ro", "mode=rw"):
        raise ValueError(f"{url!r}: the only option of file:// is ?mode=ro or ?mode=rw")
    return path, query == "mode=ro"


def close_cluster(url: str, *, refuse_new: bool = False) -> None:
    """Stop an in-process cluster and forget it (its memory topics are gone).

    With ``refuse_new``, clients connecting to ``url`` afterwards get
    :class:`~kafkette.errors.KafkaConnectionError` instead of a new empty cluster."""
    with _clusters_lock:
        cluster = _clusters.pop(url, None)
        if refuse_new:
            _refused.add(url)
    if cluster is not None:
        cluster.close()
