"""What the coordinator knows of the cluster's topics, and what a subscription resolves to.

The coordinator reads topics through a :data:`TopicImage`, a callable returning the
current topics by name; the broker passes its topic table, tests a dict. A member's
subscription is its topic names plus the topics its regular expression matches in full
(as Kafka's RE2J ``matcher().matches()``; see :mod:`.regex`), taken from the image each
time the group's metadata is computed, so a topic created later is picked up.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

import attrs

from kafkette.server.groups.consumer_protocol.regex import regex_matches


@attrs.frozen
class TopicInfo:
    """One topic as the group coordinator sees it."""

    topic_id: uuid.UUID
    name: str
    partitions: int


TopicImage = Callable[[], Mapping[str, TopicInfo]]
"""Returns the cluster's topics by name."""


def resolve(
    topic_names: Iterable[str], regex: str | None, topics: Mapping[str, TopicInfo]
) -> frozenset[str]:
    """The existing topics a subscription covers: its names that exist, and the regex's matches."""
    resolved = {name for name in topic_names if name in topics}
    if regex:
        resolved |= regex_matches(regex, topics)
    return frozenset(resolved)
