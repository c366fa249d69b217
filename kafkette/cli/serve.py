"""``kafkette serve``: run one broker until SIGINT or SIGTERM.

Settings come from a ``server.properties`` file (``--config``) and ``--set
KEY=VALUE`` options (which win), with Kafka's property names; an unknown
property or an invalid value stops it at once with exit status 2, naming the
property. Topics are kept in memory unless ``--data-dir`` (or ``log.dirs`` in
the properties) names a directory, in which case a restart reopens topics,
their configs and data. At start the soft limit of open files is raised to
the hard limit, so that many clients can connect.

With ``--sasl-user NAME:PASSWORD`` (repeatable) or ``--sasl-users-file`` the
listener is SASL_PLAINTEXT: clients must authenticate with one of
``--sasl-mechanisms`` (or the ``sasl.enabled.mechanisms`` property; PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 by default) before any other request.
Passwords are salted and hashed at start and not kept.

Listeners follow Kafka: ``--listener NAME://HOST:PORT`` (repeatable) or the
``listeners`` property, each with its security protocol from
``listener.security.protocol.map`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL by
default) and its ``advertised.listeners`` address, which Metadata and
FindCoordinator answer to the clients of that listener. SSL and SASL_SSL take
the broker's certificate from PEM files (:mod:`kafkette.server.net.tls`).
``--listen`` stays one PLAINTEXT listener (SASL_PLAINTEXT with SASL users); on
an address other machines can reach it is refused without SASL users unless
``--allow-plaintext-outside``. Before a client authenticates, frames over
``sasl.server.max.receive.size`` (512 KiB) close its connection.

For tests of clients against a failing broker, ``--fault KIND:ARGS``
(repeatable; :func:`~kafkette.server.faults.table.parse_fault_spec`) arms the
broker's fault table at start, as ``MemoryCluster.faults`` does in process:
``fail:API:ERROR[:TIMES[:TOPIC[:PARTITION]]]`` (also spelled
``API:ERROR[:TIMES]``), ``drop_response:API[:TIMES]``,
``delay:API:SECONDS[:TIMES]``, ``disconnect[:API[:TIMES]]``, ``throttle:MS``.
``--enable-fault-injection`` also lets clients arm and clear faults while it
runs, through Kafka's config APIs (:mod:`kafkette.server.faults.hook`): with
the ``super.users`` property, only those principals (SASL users, TLS client
certificates) may, and with SASL users it must be given. Without that flag
nothing arms a fault over the network.

For tests of clients following leader moves, ``--nodes N`` makes the one
broker core stand for nodes 1..N (:class:`~kafkette.server.nodes.NodeTable`),
each listening on its own port: node 1 on ``--listen``, the others on the
following ports (or each on a free one when ``--listen`` gives port 0), all
named on the start-up line (``nodes 1=HOST:PORT,2=...``). Partitions are
spread over the nodes; a request at a node that does not lead the partition
(or coordinate the group) is refused as Kafka does. A topic may have up to N
replicas (ISR, ``min.insync.replicas``, fetch-from-follower with
``--set broker.rack=R1,...,RN`` and ``--set replica.selector.class=...RackAwareReplicaSelector``:
:mod:`kafkette.server.nodes`). Leaders move with Kafka's
AlterPartitionReassignments (one replica: the new leader), e.g. from an admin
client; with ``--enable-fault-injection`` nodes stop and start
(:meth:`RemoteFaults.stop_broker <kafkette.testing.RemoteFaults.stop_broker>`).
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import signal
import socket
import ssl
import sys
from collections.abc import Sequence

import anyio
import attrs

from kafkette.errors import ConfigError, KafkaError
from kafkette.schema_registry.server.broker_access import BrokerTls
from kafkette.server.broker import Broker
from kafkette.server.config.broker_config import DEFAULT_PORT, STANDARD_AUTHORIZER, BrokerConfig
from kafkette.server.config.listeners import PROPERTY_NAMES as LISTENER_PROPERTIES
from kafkette.server.config.listeners import Listener, SecurityProtocol, listeners_from_properties
from kafkette.server.data_dir.lock import DataDirLock, DataDirLockedError
from kafkette.server.faults.table import FaultSpec, RemoteControl, parse_fault_spec
from kafkette.server.metrics.http import open_metrics_listener, serve_metrics
from kafkette.server.net.listener import serve_tcp
from kafkette.server.net.tls import PROPERTY_NAMES as TLS_PROPERTIES
from kafkette.server.net.tls import (
    ClientAuth,
    TlsSettings,
    client_auth_for,
    is_listener_tls_property,
    listener_client_auth_property,
    server_context,
)
from kafkette.server.nodes import node_racks, numbered_nodes
from kafkette.server.sasl import MECHANISMS, SaslSettings
from kafkette.server.sasl.reauth import (
    ReauthSettingError,
    is_listener_reauth_property,
    reauth_ms_by_mechanism,
)
from kafkette.server.sasl.users import CredentialsFileError

logger = logging.getLogger("kafkette.server")


def parse_host_port(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(option, f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file as Kafka's server.properties uses it: ``key=value`` lines."""
    properties: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                key, sep, value = line.partition(":")
            if not sep:
                raise ConfigError(f"{path}:{number}", f"expected key=value, got {line!r}")
            properties[key.strip()] = value.strip()
    return properties


def add_arguments(parser: argparse.ArgumentParser) -> None:
    storage = parser.add_mutually_exclusive_group()
    storage.add_argument("--data-dir", help="store topics on disk in this directory")
    storage.add_argument("--memory", action="store_true", help="store topics in memory (default)")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"address to listen on (port 0 picks a free one; default 127.0.0.1:{DEFAULT_PORT}): "
        "one PLAINTEXT listener, SASL_PLAINTEXT with SASL users; a non-loopback address "
        "without SASL users needs --allow-plaintext-outside",
    )
    parser.add_argument(
        "--advertised-listener",
        metavar="HOST:PORT",
        help="address clients are told to connect to (default: --listen)",
    )
    parser.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="NAME://HOST:PORT",
        help="a listener as in Kafka's listeners property (repeatable, instead of --listen), "
        "its security protocol from listener.security.protocol.map (by default the name: "
        "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); TLS settings are the properties "
        "ssl.certificate.location, ssl.key.location, ssl.key.password, ssl.ca.location, "
        "ssl.client.auth (required, requested, none; SSL listeners only, as Kafka since "
        "KIP-684) and listener.name.<listener>.ssl.client.auth (one listener's, SASL_SSL too)",
    )
    parser.add_argument(
        "--allow-plaintext-outside",
        action="store_true",
        help="let --listen serve unauthenticated clients on an address other machines reach",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        metavar="N",
        help="for tests: stand for N nodes (ids 1..N) on N consecutive ports from --listen's "
        "(each a free one with port 0), sharing one broker core; partitions are spread over "
        "them with up to N replicas each (racks: --set broker.rack=R1,...,RN) and leaders "
        "move with AlterPartitionReassignments",
    )
    parser.add_argument(
        "--schema-registry",
        metavar="HOST:PORT",
        help="also serve a schema registry (Confluent's REST API) on this address, its "
        "schemas in the _schemas topic; off by default",
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve the broker's metrics in Prometheus' text format on http://HOST:PORT/metrics "
        "(requests, traffic per topic, logs, groups and lag, transactions, metrics clients "
        "push by KIP-714); off by default",
    )
    parser.add_argument("--config", metavar="FILE", help="a server.properties file")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property (repeatable), e.g. --set num.partitions=3",
    )
    parser.add_argument(
        "--authorizer",
        action="store_true",
        help="decide every request by ACLs (Kafka's StandardAuthorizer; same as --set "
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer); "
        "name admins with --set super.users=User:admin",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND:ARGS",
        help="for tests: arm a fault at start (repeatable): fail:API:ERROR[:TIMES[:TOPIC"
        "[:PARTITION]]] (or API:ERROR[:TIMES]) answers the first TIMES (default 1) requests "
        "of API with the Kafka error ERROR, unserved; drop_response:API[:TIMES] serves them "
        "and closes the connection unanswered; delay:API:SECONDS[:TIMES] holds them (TIMES "
        "default always); disconnect[:API[:TIMES]] closes the connection of the next one "
        "(API * or none: any); throttle:MS puts MS in every answer's throttle_time_ms. TIMES "
        "is a number or 'always'. E.g. --fault Produce:NOT_ENOUGH_REPLICAS:3 "
        "--fault drop_response:Produce:2",
    )
    parser.add_argument(
        "--enable-fault-injection",
        action="store_true",
        help="for tests only: let clients arm and clear faults while the broker runs, with "
        "IncrementalAlterConfigs or AlterConfigs on the broker resource naming "
        "kafkette.fault.fail, .drop_response, .delay, .disconnect, .throttle or .clear "
        "(kafkette.testing.RemoteFaults or any Kafka admin client); with the super.users "
        "property only its principals may (SASL users need it). Off by default: a fault is "
        "a denial of service by design",
    )
    sasl = parser.add_argument_group(
        "SASL",
        "Any --sasl-user or --sasl-users-file makes the listener SASL_PLAINTEXT: clients "
        "connect with security.protocol=SASL_PLAINTEXT, sasl.mechanism and "
        "sasl.username/sasl.password, and nothing but ApiVersions is served before they "
        "authenticate.",
    )
    sasl.add_argument(
        "--sasl-user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a user allowed to connect (repeatable); the password is the text after the "
        "first colon",
    )
    sasl.add_argument(
        "--sasl-users-file",
        metavar="FILE",
        help="users, one NAME:PASSWORD a line (# starts a comment); keeps passwords out of "
        "the process list",
    )
    sasl.add_argument(
        "--sasl-mechanisms",
        metavar="LIST",
        help=f"enabled SASL mechanisms, comma-separated (default: the "
        f"sasl.enabled.mechanisms property, else all of {','.join(MECHANISMS)})",
    )


SECURITY_PROPERTIES = LISTENER_PROPERTIES | TLS_PROPERTIES | {"sasl.server.max.receive.size"}
"""Properties read by the listeners, not the broker core (nor described by DescribeConfigs:
``ssl.key.password`` is among them)."""

DEFAULT_SASL_MAX_RECEIVE_SIZE = 524_288


def _all_properties(args: argparse.Namespace) -> dict[str, str]:
    properties: dict[str, str] = {}
    if args.config:
        properties.update(read_properties(args.config))
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError("--set", f"expected KEY=VALUE, got {item!r}")
        properties[key.strip()] = value.strip()
    if args.authorizer:
        properties["authorizer.class.name"] = STANDARD_AUTHORIZER
    return properties


def build_config(args: argparse.Namespace) -> BrokerConfig:
    properties = _all_properties(args)
    config = BrokerConfig.from_properties(
        {
            k: v
            for k, v in properties.items()
            if k not in SECURITY_PROPERTIES
            and not is_listener_reauth_property(k)
            and not is_listener_tls_property(k)
        }
    )
    host, port = parse_host_port(args.listen or f"127.0.0.1:{DEFAULT_PORT}", "--listen")
    config.host, config.port = host, port
    if args.advertised_listener:
        config.advertised_host, config.advertised_port = parse_host_port(
            args.advertised_listener, "--advertised-listener"
        )
    if args.data_dir:
        config.data_dir = args.data_dir
    elif args.memory:
        config.data_dir = None
    return config


MAX_NODES = 64


@attrs.frozen
class ServeListener:
    """A listener ready to open: its configuration and, for SSL and SASL_SSL, its context."""

    listener: Listener
    tls: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None


def build_listeners(
    args: argparse.Namespace,
    config: BrokerConfig,
    sasl: SaslSettings | None,
    nodes: int = 1,
) -> list[ServeListener]:
    """The listeners to open (raises :class:`ConfigError` naming the option or property).

    ``--listen`` (the default) is one listener, PLAINTEXT or SASL_PLAINTEXT with
    ``sasl``; on an address other machines reach it must be SASL_PLAINTEXT unless
    ``--allow-plaintext-outside``. ``--listener`` and the ``listeners`` property
    name theirs. ``config.host``/``port`` become the first listener's.
    """
    properties = _all_properties(args)
    listeners = listeners_from_properties(properties, args.listener)
    if listeners is None:
        host, port = config.host, config.port
        protocol: SecurityProtocol = "SASL_PLAINTEXT" if sasl is not None else "PLAINTEXT"
        listener = Listener(protocol, host, port, protocol, None, explicit=False)
        if sasl is None and not listener.loopback and not args.allow_plaintext_outside:
            raise ConfigError(
                "--listen",
                f"{host} is reachable from other machines and clients would not authenticate; "
                "give SASL users (--sasl-user, --sasl-users-file), name the listener "
                f"(--listener PLAINTEXT://{host}:{port}) or pass --allow-plaintext-outside",
            )
        listeners = [listener]
    else:
        if args.listen or args.advertised_listener:
            option = "--listen" if args.listen else "--advertised-listener"
            raise ConfigError(
                option, "give either --listen or listeners (--listener, advertised.listeners)"
            )
        if nodes > 1 and len(listeners) > 1:
            raise ConfigError("--nodes", "serves one listener only (several were given)")
    raw_cap = properties.get("sasl.server.max.receive.size", str(DEFAULT_SASL_MAX_RECEIVE_SIZE))
    if not raw_cap.strip().isdigit() or int(raw_cap) < 1:
        raise ConfigError(
            "sasl.server.max.receive.size", f"must be a positive integer, got {raw_cap!r}"
        )
    if sasl is not None:
        sasl = attrs.evolve(sasl, max_receive_size=int(raw_cap))
    tls_settings = TlsSettings.from_properties(properties)
    contexts: dict[ClientAuth, ssl.SSLContext] = {}
    built = []
    for listener in listeners:
        if listener.uses_sasl and sasl is None:
            raise ConfigError(
                listener.name,
                f"a {listener.protocol} listener needs SASL users (--sasl-user, --sasl-users-file)",
            )
        context = None
        if listener.uses_tls:
            client_auth, left_out = client_auth_for(properties, listener.name, listener.protocol)
            if left_out:
                logger.warning(
                    "kafkette serve: ssl.client.auth applies to SSL listeners only (as in "
                    "Kafka since KIP-684): %s=%s sets it for the %s listener %s",
                    listener_client_auth_property(listener.name),
                    tls_settings.client_auth,
                    listener.protocol,
                    listener.name,
                )
            if client_auth not in contexts:
                contexts[client_auth] = server_context(
                    attrs.evolve(tls_settings, client_auth=client_auth)
                )
            context = contexts[client_auth]
        built.append(
            ServeListener(
                listener,
                context,
                _listener_sasl(sasl, listener.name, properties, config)
                if listener.uses_sasl
                else None,
            )
        )
    first = listeners[0]
    config.host, config.port = first.host, first.port
    if first.advertised is not None:
        config.advertised_host, config.advertised_port = first.advertised
    return built


def _listener_sasl(
    sasl: SaslSettings | None, listener: str, properties: dict[str, str], config: BrokerConfig
) -> SaslSettings | None:
    """The listener's SASL settings with its ``connections.max.reauth.ms`` (KIP-368)."""
    if sasl is None:
        return None
    try:
        reauth = reauth_ms_by_mechanism(
            properties, listener, sasl.mechanisms, config.connections_max_reauth_ms
        )
    except ReauthSettingError as exc:
        raise ConfigError(exc.name, str(exc)) from None
    return attrs.evolve(sasl, connections_max_reauth_ms=reauth)


def build_nodes(args: argparse.Namespace) -> int:
    """The ``--nodes`` count, checked (raises :class:`ConfigError`)."""
    nodes: int = args.nodes
    if not 1 <= nodes <= MAX_NODES:
        raise ConfigError("--nodes", f"must be between 1 and {MAX_NODES}, got {nodes}")
    return nodes


def build_faults(args: argparse.Namespace) -> list[FaultSpec]:
    """The ``--fault`` options, parsed (raises :class:`ConfigError` naming the bad one)."""
    specs = []
    for text in args.fault:
        try:
            specs.append(parse_fault_spec(text))
        except ValueError as exc:
            raise ConfigError("--fault", str(exc)) from None
    return specs


def build_remote_control(
    args: argparse.Namespace, config: BrokerConfig, sasl: SaslSettings | None
) -> RemoteControl | None:
    """Who may arm faults over the network: nobody without ``--enable-fault-injection``;
    else the broker's ``super.users`` when given (SASL users, or TLS client
    certificates' ``User:CN=...``), which SASL users make mandatory; else every client
    (raises :class:`ConfigError`)."""
    if not args.enable_fault_injection:
        return None
    if config.super_users:
        return RemoteControl(frozenset(config.super_users))
    if sasl is not None:
        raise ConfigError(
            "--enable-fault-injection",
            "with SASL users, name the principals that may arm faults in the super.users "
            "property (--set super.users=User:admin)",
        )
    return RemoteControl()


def _sasl_user(text: str, where: str) -> tuple[str, str]:
    name, sep, password = text.partition(":")
    if not sep or not name.strip() or not password:
        raise ConfigError(where, "expected NAME:PASSWORD")
    return name.strip(), password


def build_sasl(args: argparse.Namespace, config: BrokerConfig | None = None) -> SaslSettings | None:
    """The listener's SASL settings from the ``--sasl-*`` options (None: PLAINTEXT).

    The mechanisms are ``--sasl-mechanisms``, else the ``sasl.enabled.mechanisms``
    property of ``config``. The passwords are dropped from ``args`` once hashed.
    """
    users = [_sasl_user(item, "--sasl-user") for item in args.sasl_user]
    if args.sasl_users_file:
        with open(args.sasl_users_file, encoding="utf-8") as f:
            for number, raw in enumerate(f, 1):
                line = raw.rstrip("\r\n")
                if line.strip() and not line.lstrip().startswith("#"):
                    users.append(_sasl_user(line, f"{args.sasl_users_file}:{number}"))
    args.sasl_user = []
    property_given = config is not None and "sasl.enabled.mechanisms" in config.overrides
    if not users:
        if args.sasl_mechanisms or property_given:
            where = "--sasl-mechanisms" if args.sasl_mechanisms else "sasl.enabled.mechanisms"
            raise ConfigError(where, "needs at least one --sasl-user")
        return None
    if args.sasl_mechanisms:
        mechanisms = [m.strip().upper() for m in args.sasl_mechanisms.split(",") if m.strip()]
    elif config is not None:
        mechanisms = list(config.sasl_enabled_mechanisms)
    else:
        mechanisms = list(MECHANISMS)
    try:
        return SaslSettings.with_users(mechanisms, users)
    except ValueError as exc:
        raise ConfigError("--sasl-mechanisms", str(exc)) from None


def raise_open_files_limit() -> int | None:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or (target != resource.RLIM_INFINITY and soft >= target):
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


async def run(
    config: BrokerConfig,
    sasl: SaslSettings | None = None,
    faults: Sequence[FaultSpec] = (),
    nodes: int = 1,
    listeners: Sequence[ServeListener] | None = None,
    remote_faults: RemoteControl | None = None,
    schema_registry: tuple[str, int] | None = None,
    metrics: tuple[str, int] | None = None,
    registry_tls: BrokerTls | None = None,
) -> int:
    """Serve until SIGINT or SIGTERM; the exit status (1: the schema registry failed)."""
    status = 0
    registry_tls = registry_tls or BrokerTls(None, None)
    if listeners is None:  # one listener on config.host:config.port
        protocol: SecurityProtocol = "SASL_PLAINTEXT" if sasl is not None else "PLAINTEXT"
        listeners = [
            ServeListener(
                Listener(protocol, config.host, config.port, protocol, None, explicit=False),
                None,
                _listener_sasl(sasl, protocol, {}, config),
            )
        ]
    lock = None
    if config.data_dir is not None:
        lock = DataDirLock(config.data_dir, f"kafkette serve on {config.host}:{config.port}")
    try:
        broker = Broker(config)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    broker.own_collector()  # its logs loaded: frozen out of the collector's reach (#30)
    try:
        metrics_at = metrics or ("", 0)
        # Bound before anything is served: an address in use is one error line, not a
        # traceback from the task group.
        metrics_listener = await open_metrics_listener(*metrics) if metrics else None
        if sasl is not None:  # users added over the protocol authenticate on the listeners
            broker.use_credentials(sasl.store)
        for spec in faults:  # armed and logged before the listening line
            spec.arm(broker.faults)
            logger.warning("kafkette serve: fault armed: %s", spec)
        if remote_faults is not None:
            broker.faults.remote = remote_faults
            who = (
                "any client"
                if remote_faults.super_users is None
                else ",".join(sorted(remote_faults.super_users))
            )
            logger.warning("kafkette serve: fault injection enabled for %s", who)
        async with anyio.create_task_group() as tg:
            first_node = 1 if nodes > 1 else None
            first = listeners[0]
            several = len(listeners) > 1
            port = await tg.start(
                functools.partial(
                    serve_tcp,
                    sasl=first.sasl,
                    node=first_node,
                    tls=first.tls,
                    advertised=_advertised(first.listener, config) if several else None,
                    name=first.listener.name,
                ),
                broker,
                config.host,
                config.port,
            )
            ports = [port]
            for node in range(2, nodes + 1):
                wanted = config.port + node - 1 if config.port else 0
                serve_node = functools.partial(serve_tcp, sasl=first.sasl, node=node, tls=first.tls)
                ports.append(await tg.start(serve_node, broker, config.host, wanted))
            others = []
            for extra in listeners[1:]:
                bound = await tg.start(
                    functools.partial(
                        serve_tcp,
                        sasl=extra.sasl,
                        tls=extra.tls,
                        advertised=_advertised(extra.listener, config),
                        name=extra.listener.name,
                    ),
                    broker,
                    extra.listener.host,
                    extra.listener.port,
                )
                others.append((extra.listener, bound))
            tg.start_soon(broker.run_background)
            if metrics_listener is not None:
                metrics_port = await tg.start(
                    functools.partial(serve_metrics, listener=metrics_listener),
                    broker.metrics.scrape,
                    *metrics_at,
                )
                logger.info(
                    "kafkette serve: metrics on http://%s:%d/metrics", metrics_at[0], metrics_port
                )
            if config.port == 0:
                config.port = port
            where = f"in {config.data_dir}" if config.data_dir else "in memory"
            host, advertised_port = config.advertised
            listed = ""
            if nodes > 1:
                # Advertised ports follow the first one as the listening ports do.
                advertised = [
                    (host, advertised_port + i if config.advertised_port else bound)
                    for i, bound in enumerate(ports)
                ]
                broker.nodes = numbered_nodes(
                    advertised,
                    config.overrides.get("broker.rack"),
                    config.overrides.get("replica.selector.class"),
                )
                listed = ", nodes " + ",".join(
                    f"{i}={h}:{p}" for i, (h, p) in enumerate(advertised, start=1)
                )
            logger.info(
                "kafkette serve: listening on %s:%d (advertised %s:%d), storing topics %s, "
                "cluster id %s, node id %d%s",
                config.host,
                port,
                host,
                advertised_port,
                where,
                broker.cluster_id,
                broker.node_id if nodes == 1 else 1,
                listed,
            )
            if several or first.listener.explicit:
                logger.info(
                    "kafkette serve: listeners %s",
                    ",".join(
                        f"{listener.name}://{listener.host}:{bound} ({listener.protocol})"
                        for listener, bound in [(first.listener, port), *others]
                    ),
                )
            if sasl is not None:
                logger.info(
                    "kafkette serve: SASL mechanisms %s, %d users",
                    ",".join(sasl.mechanisms),
                    len(sasl.store.users),
                )
            _log_authorizer(broker)
            if schema_registry is not None and not await _start_schema_registry(
                tg, schema_registry, listeners, [port, *others], sasl, broker, registry_tls
            ):
                tg.cancel_scope.cancel()
                status = 1
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    logger.info(
                        "kafkette serve: %s received, shutting down", signal.Signals(signum).name
                    )
                    tg.cancel_scope.cancel()
                    break
    finally:
        broker.close()
        if lock is not None:
            lock.release()
        logger.info("kafkette serve: stopped")
    return status


async def _start_schema_registry(
    tg: anyio.abc.TaskGroup,
    address: tuple[str, int],
    listeners: Sequence[ServeListener],
    bound: Sequence[int | tuple[Listener, int]],
    sasl: SaslSettings | None,
    broker: Broker,
    broker_tls: BrokerTls,
) -> bool:
    """The registry reaches this broker as any client does, on one of its listeners
    (:mod:`kafkette.schema_registry.server.broker_access`: with ACLs on, a SASL one as
    its own super user). It speaks HTTPS with the first TLS listener's certificate, if
    there is one, and asks for the broker's SASL users as HTTP Basic credentials, if
    there are some. False (logged) when it cannot start: the broker refused it (ACLs),
    did not answer, or its TLS material cannot be used."""
    from kafkette.schema_registry.server import broker_access
    from kafkette.schema_registry.server.http import serve_registry

    doors = [
        broker_access.Door(
            s.listener.protocol,
            "127.0.0.1" if s.listener.host in ("0.0.0.0", "::", "") else s.listener.host,
            where if isinstance(where, int) else where[1],
            tuple(s.sasl.mechanisms) if s.sasl is not None else (),
            s.tls is not None and s.tls.verify_mode != ssl.CERT_NONE,
        )
        for s, where in zip(listeners, bound, strict=True)
    ]
    door = broker_access.choose_listener(doors, acls=broker.authorizer is not None)
    assert door is not None  # a broker has a listener
    password = None
    if door.sasl:
        assert sasl is not None  # a SASL listener has users
        password = broker_access.registry_password()
        sasl.store.add_user(broker_access.REGISTRY_USER, password)
        if broker.authorizer is not None:
            authorizer = broker.authorizer
            authorizer.super_users = authorizer.super_users | {broker_access.REGISTRY_PRINCIPAL}
    tls = next((s.tls for s in listeners if s.tls is not None), None)
    try:
        client = broker_access.client_settings(door, broker_tls, password)
        registry_port = await tg.start(
            functools.partial(
                serve_registry,
                ssl_context=tls,
                authenticate=sasl.store.check_plain if sasl is not None else None,
                client_config=client,
            ),
            client["bootstrap.servers"],
            *address,
        )
    except (KafkaError, ValueError, OSError) as error:  # ssl.SSLError is an OSError
        hint = ""
        if isinstance(error, KafkaError) and broker.authorizer is not None and not door.sasl:
            hint = (
                f" (on the {door.protocol} listener it is a client like any other: give it "
                "ACLs on the _schemas topic, or give the broker a SASL listener, where it is "
                "its own super user)"
            )
        logger.error("kafkette serve: the schema registry could not start: %s%s", error, hint)
        return False
    logger.info(
        "kafkette serve: schema registry listening on %s:%d (%s%s), reaching the broker on "
        "%s %s:%d%s",
        address[0],
        registry_port,
        "HTTPS" if tls is not None else "HTTP",
        ", Basic authentication" if sasl is not None else "",
        door.protocol,
        door.host,
        door.port,
        f" as {broker_access.REGISTRY_PRINCIPAL}" if door.sasl else "",
    )
    return True


def _log_authorizer(broker: Broker) -> None:
    """The start-up line saying whether requests are decided by ACLs, and by which rules."""
    authorizer = broker.authorizer
    if authorizer is None:
        logger.info(
            "kafkette serve: authorizer off: every request is allowed (--authorizer turns ACLs on)"
        )
        return
    config = broker.config
    logger.info(
        "kafkette serve: authorizer on (%s): %d ACL bindings, super.users %s, "
        "allow.everyone.if.no.acl.found=%s",
        config.authorizer_class_name,
        len(authorizer.bindings),
        ";".join(sorted(authorizer.super_users)) or "-",
        "true" if authorizer.allow_everyone_if_no_acl_found else "false",
    )


def _advertised(listener: Listener, config: BrokerConfig) -> tuple[str, int]:
    """What a listener's clients are told (port 0: the bound port)."""
    if listener.advertised is not None:
        return listener.advertised
    host = listener.host if listener.host not in ("0.0.0.0", "::") else socket.gethostname()
    return (host, listener.port)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = build_config(args)
        sasl = build_sasl(args, config)
        faults = build_faults(args)
        remote_faults = build_remote_control(args, config, sasl)
        nodes = build_nodes(args)
        node_racks(config.overrides.get("broker.rack"), nodes)  # checked before listening
        listeners = build_listeners(args, config, sasl, nodes)
        metrics = parse_host_port(args.metrics, "--metrics") if args.metrics else None
        schema_registry = None
        if args.schema_registry:
            schema_registry = parse_host_port(args.schema_registry, "--schema-registry")
        tls_settings = TlsSettings.from_properties(_all_properties(args))
        registry_tls = BrokerTls(
            tls_settings.certificate_location,
            tls_settings.key_location,
            tls_settings.key_password,
        )
    except (ConfigError, OSError) as exc:
        print(f"kafkette serve: {exc}", file=sys.stderr)
        return 2
    open_files = raise_open_files_limit()
    if open_files is not None:
        logger.info("kafkette serve: up to %d open files", open_files)
    # The modules, classes and codecs loaded so far live as long as the process: kept
    # out of the collector's reach, they are not traversed again at every full
    # collection (which appends, keeping objects, trigger steadily).
    gc.freeze()
    try:
        status = anyio.run(
            run,
            config,
            sasl,
            faults,
            nodes,
            listeners,
            remote_faults,
            schema_registry,
            metrics,
            registry_tls,
        )
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        return 130
    except (OSError, DataDirLockedError, CredentialsFileError) as exc:
        print(f"kafkette serve: {exc}", file=sys.stderr)
        return 1
    except Exception as error:
        # A listener's address in use (or not assignable) fails its task in the task
        # group: one line per address, as for the errors above, not a group traceback.
        unbound = _os_errors(error)
        if unbound is None:
            raise
        for each in unbound:
            print(f"kafkette serve: {each}", file=sys.stderr)
        return 1
    return status


def _os_errors(error: BaseException) -> list[OSError] | None:
    """The OSErrors of a (nested) exception group made of nothing else, else None.

    Read by its ``exceptions`` (Python 3.10 has no built-in ExceptionGroup: anyio
    raises the backport's there).
    """
    inner = getattr(error, "exceptions", None)
    if not isinstance(inner, tuple):
        return [error] if isinstance(error, OSError) else None
    leaves: list[OSError] = []
    for each in inner:
        found = _os_errors(each)
        if found is None:
            return None
        leaves.extend(found)
    return leaves
