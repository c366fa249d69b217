"""Reading Prometheus' text format back in tests: samples by name and labels."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = frozenset[tuple[str, str]]


def samples(text: str) -> dict[str, dict[Labels, float]]:
    """Every sample of a scrape: metric name -> labels -> value (types and help checked:
    each sample's family was announced by a TYPE line)."""
    found: dict[str, dict[Labels, float]] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match is not None, line
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, line
        pairs = frozenset(
            (k, v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
            for k, v in _LABEL.findall(labels or "")
        )
        found.setdefault(name, {})[pairs] = float(value)
    return found


def value(scraped: dict[str, dict[Labels, float]], name: str, **labels: str) -> float:
    """The one sample of ``name`` with exactly these labels."""
    return scraped[name][frozenset(labels.items())]


def by_label(
    scraped: dict[str, dict[Labels, float]], name: str, key: str, **fixed: str
) -> dict[str, float]:
    """The samples of ``name`` whose labels include ``fixed``, by the value of label ``key``."""
    result: dict[str, float] = {}
    for labels, number in scraped.get(name, {}).items():
        as_dict = dict(labels)
        if all(as_dict.get(k) == v for k, v in fixed.items()) and key in as_dict:
            result[as_dict[key]] = number
    return result
