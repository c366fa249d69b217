"""Prometheus' text exposition format (version 0.0.4), written by hand.

A scrape is a list of families: each a ``# HELP`` and a ``# TYPE`` line, then
one line per sample, ``name{label="value",...} number``. Label values escape
backslash, double quote and newline; HELP text escapes backslash and newline;
numbers are integers when whole, else Python's shortest repr, and ``+Inf``,
``-Inf``, ``NaN`` as Prometheus spells them. No I/O here: :func:`render` returns
the text for whoever serves it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence

import attrs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type of a scrape's answer."""

Labels = tuple[tuple[str, str], ...]
"""Label names and values, in the order they are written."""

_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


@attrs.define
class Family:
    """One metric family: its name, type (``counter``, ``gauge``, ``histogram``,
    ``untyped``), help text and samples (name suffix, labels, value)."""

    name: str
    type: str
    help: str
    samples: list[tuple[str, Labels, float]] = attrs.Factory(list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        """Add one sample (``suffix``: ``_bucket``, ``_sum``, ``_count``, ``_total``)."""
        self.samples.append((suffix, labels, value))


def metric_name(text: str) -> str:
    """A valid Prometheus metric name for ``text`` (``org.apache.kafka.x`` becomes
    ``org_apache_kafka_x``; a leading digit gets a ``_`` before it)."""
    name = _INVALID_NAME.sub("_", text)
    return "_" + name if not name or name[0].isdigit() else name


def label_name(text: str) -> str:
    """A valid label name for ``text`` (``node.id`` becomes ``node_id``)."""
    name = _INVALID_LABEL.sub("_", text)
    if not name or name[0].isdigit():
        name = "_" + name
    return name


def format_value(value: float) -> str:
    """A sample's number as Prometheus writes it."""
    if isinstance(value, int):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels) + "}"


STEP_LINES = 1000
"""Sample lines :func:`render_steps` writes between two steps."""


def render_steps(family: Family, out: list[str]) -> Iterator[None]:
    """Append ``family``'s text to ``out`` (nothing without samples), yielding every
    :data:`STEP_LINES` lines."""
    if not family.samples:
        return
    name = family.name
    out.append(f"# HELP {name} {_escape_help(family.help)}\n# TYPE {name} {family.type}\n")
    for index, (suffix, labels, value) in enumerate(family.samples, 1):
        out.append(f"{name}{suffix}{_labels(labels)} {format_value(value)}\n")
        if index % STEP_LINES == 0:
            yield


def render(families: Iterable[Family]) -> str:
    """The text of a scrape: every family that has samples, in the order given."""
    out: list[str] = []
    for family in families:
        for _ in render_steps(family, out):
            pass
    return "".join(out)


def histogram_samples(
    family: Family,
    labels: Labels,
    bounds: Sequence[float],
    counts: Sequence[int],
    total: float,
) -> None:
    """Add a histogram's ``_bucket`` (cumulative, ``le`` last), ``_sum`` and ``_count``
    samples to ``family``; ``counts[i]`` is the number of observations in bucket i
    alone (the last one past every bound)."""
    running = 0
    for bound, count in zip(bounds, counts, strict=False):
        running += count
        family.add((*labels, ("le", format_value(bound))), running, "_bucket")
    running += counts[len(bounds)]
    family.add((*labels, ("le", "+Inf")), running, "_bucket")
    family.add(labels, total, "_sum")
    family.add(labels, running, "_count")
