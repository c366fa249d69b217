"""OpenTelemetry is off by default and costs nothing then; asked for without its API
installed, or with something that is not a provider, it is a clear error at once."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

from kafkette import AsyncConsumer, Consumer, Producer
from kafkette.errors import ConfigError
from kafkette.testing import MemoryCluster
from tests.test_import_graph import PACKAGE, _imported, _type_checking_nodes, module_names

OTEL = "kafkette.otel"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_clients_without_providers_import_nothing_of_opentelemetry() -> None:
    """A producer and a consumer that send, poll, iterate and commit without a provider
    load neither kafkette.otel nor OpenTelemetry's tracing, metrics or propagation API
    (the broker's own metrics, another room, are not the clients')."""
    done = _run(
        """
        import sys
        from kafkette import Consumer, Producer, TopicPartition
        from kafkette.testing import MemoryCluster

        with MemoryCluster() as cluster:
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
                p.send("t", b"v", headers=[("h", b"1")]).result(10)
                p.send("t", b"w").result(10)
            with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                          auto_offset_reset="earliest") as c:
                c.assign([TopicPartition("t", 0)])
                for record in c:
                    if record.offset == 1:
                        break
                c.commit()
        api = ("opentelemetry.trace", "opentelemetry.metrics", "opentelemetry.propagate")
        print(sorted(m for m in sys.modules if m.startswith(("kafkette.otel", *api))))
        """
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


def test_asking_for_opentelemetry_without_its_api_names_the_extra() -> None:
    """``opentelemetry=True`` where opentelemetry-api is not installed fails at once, naming
    the setting and ``pip install kafkette[otel]``."""
    done = _run(
        """
        import sys
        for name in ("opentelemetry.trace", "opentelemetry.metrics", "opentelemetry.propagate"):
            sys.modules[name] = None  # as if opentelemetry-api were not installed
        from kafkette import Producer
        from kafkette.errors import ConfigError

        try:
            Producer(bootstrap_servers="127.0.0.1:9", opentelemetry=True)
        except ConfigError as exc:
            print(exc)
        """
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "configuration setting 'opentelemetry.enabled': OpenTelemetry's API is not "
        "installed: pip install kafkette[otel]\n",
        "",
    )


@pytest.mark.parametrize("client", [Producer, Consumer, AsyncConsumer])
def test_a_setting_that_is_not_a_provider_is_refused(client: type) -> None:
    with MemoryCluster() as cluster, pytest.raises(ConfigError) as caught:
        client(bootstrap_servers=cluster.bootstrap_servers, tracer_provider=object())
    assert caught.value.args[0] == "tracer.provider"
    with pytest.raises(ConfigError) as caught:
        client(bootstrap_servers="localhost:9092", meter_provider="prometheus")
    assert caught.value.args == (
        "meter.provider",
        "expected an OpenTelemetry provider (with get_meter()), got 'prometheus'",
    )


def _otel_edges() -> dict[str, set[str]]:
    """The run-time imports (as tests/test_import_graph.py reads them) of the modules that
    mention kafkette.otel or are in it; the others cannot import it."""
    modules = module_names(PACKAGE)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        text = path.read_text()
        if not name.startswith(OTEL) and OTEL not in text:
            continue
        tree = ast.parse(text, str(path))
        hidden = _type_checking_nodes(tree)
        targets = graph[name] = set()
        for node in ast.walk(tree):
            if id(node) not in hidden:
                targets.update(_imported(name, path, node, modules))
        targets.discard(name)
    return graph


def test_only_the_cores_import_the_otel_package_and_it_imports_no_client() -> None:
    """The rule of kafkette/otel/ (as tests/test_import_graph.py's rooms): the producer and
    consumer cores import it (inside a function, when enabled), nothing else does; it
    imports no client module at run time (annotations only), so it can never pull a core
    into a cycle."""
    graph = _otel_edges()
    importers = {
        name
        for name, targets in graph.items()
        if not name.startswith(OTEL) and any(t.startswith(OTEL) for t in targets)
    }
    assert importers == {"kafkette.producer.core", "kafkette.consumer.core"}
    reached = {
        target
        for name, targets in graph.items()
        if name.startswith(OTEL)
        for target in targets
        if not target.startswith(OTEL)
    }
    assert reached == {"kafkette.errors", "kafkette._version"}
