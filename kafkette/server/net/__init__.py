"""The broker's network edge: listeners, connections, framing, TLS and zero-copy sends.

Owns the sockets and nothing else: :mod:`~kafkette.server.net.listener` accepts
connections (asyncio protocols, or trio streams through
:mod:`~kafkette.server.net.socket_connection`), :mod:`~kafkette.server.net.frames`
turns a frame into a served request (the one entry point of every transport,
the in-process one included), :mod:`~kafkette.server.net.frame_queue` keeps a
connection's answers in order, :mod:`~kafkette.server.net.tls` builds the
server's TLS context, :mod:`~kafkette.server.net.zero_copy` (with the optional
``_splice`` extension) sends stored bytes without copying them.

May import the core (``kafkette.server`` top level), ``config``, ``faults``,
``data_dir``, ``sasl``, ``acl`` and ``handlers.api_versions``. Only the command
(:mod:`kafkette.cli.serve`), the in-process transport and the test harness
import this room.
"""
