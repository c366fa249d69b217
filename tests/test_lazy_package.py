"""``import kafkette`` loads none of the clients; each public name loads its own.

Importing every client up front took most of a second, paid by every script and
command that needed only one of them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import kafkette

CLIENT_PACKAGES = ("kafkette.admin", "kafkette.consumer", "kafkette.producer", "kafkette.server")


def loaded_after(statement: str) -> set[str]:
    """The client packages loaded in a new interpreter after ``statement``."""
    script = (
        f"import sys\n{statement}\n"
        f"print(' '.join(p for p in {CLIENT_PACKAGES!r} if p in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


def test_importing_the_package_loads_no_client() -> None:
    assert loaded_after("import kafkette") == set()


def test_a_name_loads_its_client_only() -> None:
    assert loaded_after("from kafkette import Producer") == {"kafkette.producer"}


def test_the_names_are_the_clients_own() -> None:
    from kafkette.admin import AdminClient
    from kafkette.consumer.share import ShareConsumer
    from kafkette.producer import AsyncProducer

    assert kafkette.AdminClient is AdminClient
    assert kafkette.AsyncProducer is AsyncProducer
    assert kafkette.ShareConsumer is ShareConsumer
    assert set(kafkette.__all__) <= set(dir(kafkette))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'kafkette' has no attribute 'Produser'"):
        kafkette.Produser  # noqa: B018
