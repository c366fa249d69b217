"""What the coordinator knows of the cluster's topics, and what a subscription resolves to.

The coordinator reads topics through a :data:`TopicImage`, a callable returning the
current topics by name; the broker passes its topic table, tests a dict. A member's
subscription is its topic names plus the topics its regular expression matches in full
(as Kafka's RE2J ``matcher().matches()``), taken from the image each time the group's
metadata is computed, so a topic created later is picked up.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache

import attrs

from kafkette.errors import InvalidRegularExpressionError


@attrs.frozen
class TopicInfo:
    """One topic as the group coordinator sees it."""

    topic_id: uuid.UUID
    name: str
    partitions: int


TopicImage = Callable[[], Mapping[str, TopicInfo]]
"""Returns the cluster's topics by name."""


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or INVALID_REGULAR_EXPRESSION naming it."""
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex {pattern!r} is invalid: {e}"
        ) from None


def regex_matches(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The topic names that ``pattern`` matches in full."""
    compiled = compile_regex(pattern)
    return frozenset(name for name in names if compiled.fullmatch(name))


def resolve(
    topic_names: Iterable[str], regex: str | None, topics: Mapping[str, TopicInfo]
) -> frozenset[str]:
    """The existing topics a subscription covers: its names that exist, and the regex's matches."""
    resolved = {name for name in topic_names if name in topics}
    if regex:
        resolved |= regex_matches(regex, topics)
    return frozenset(resolved)
