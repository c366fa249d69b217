"""Hypothesis strategies drawn from the generated message tables."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from kafkette.protocol.schema import EMPTY_LIST, NEW_STRUCT, Array, Field, Struct, in_range

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

_text = st.text(max_size=12)


def primitive(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in _INT_BOUNDS:
        low, high = _INT_BOUNDS[ftype]
        edges = [low, high, 0] + ([-1] if low < 0 else [])
        return st.one_of(st.sampled_from(edges), st.integers(low, high))
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False, width=64)
    if ftype == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if ftype == "string":
        return _text
    if ftype in ("bytes", "records"):
        return st.binary(max_size=16)
    raise AssertionError(ftype)


def default_value(field: Field) -> Any:
    if field.default is EMPTY_LIST:
        return []
    if field.default is NEW_STRUCT:
        assert isinstance(field.type, type)
        return field.type()
    return field.default


def value_for(
    field: Field, ftype: Any, version: int, flexible: bool, depth: int
) -> st.SearchStrategy[Any]:
    if isinstance(ftype, Array):
        element = value_for(field, ftype.element, version, flexible, depth + 1)
        return st.lists(element, max_size=3 if depth < 2 else 1)
    if isinstance(ftype, str):
        return primitive(ftype)
    return struct_of(ftype, version, flexible, depth + 1)


ValueStrategy = Callable[[Any, int, bool, int], st.SearchStrategy[Any]]
"""``(field type, version, flexible, depth)``: the values of a present field."""


def struct_of(
    cls: type[Struct],
    version: int,
    flexible: bool,
    depth: int = 0,
    values: ValueStrategy | None = None,
) -> st.SearchStrategy[Any]:
    """Random instances of ``cls`` valid at ``version``: absent fields keep their defaults.

    ``values`` draws present fields (default: :func:`value_for`'s small values)."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for field in cls.FIELDS:
        present = in_range(version, field.versions)
        if field.tag is not None and not (flexible and in_range(version, field.tagged_versions)):
            present = False
        if not present:
            kwargs[field.name] = st.just(default_value(field))
            continue
        if values is None:
            strategy = value_for(field, field.type, version, flexible, depth)
        else:
            strategy = values(field.type, version, flexible, depth)
        if in_range(version, field.nullable):
            strategy = st.one_of(st.none(), strategy)
        kwargs[field.name] = strategy
    return st.builds(cls, **kwargs)
