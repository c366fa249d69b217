"""Every name a public module lists in ``__all__`` exists."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "kafkette",
    "kafkette.admin",
    "kafkette.consumer",
    "kafkette.consumer.assignors",
    "kafkette.consumer.share",
    "kafkette.errors",
    "kafkette.protocol.headers",
    "kafkette.protocol.messages",
    "kafkette.protocol.records",
    "kafkette.testing",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported, name
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"
