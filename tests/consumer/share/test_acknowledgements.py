"""The share consumer's held records and booked acknowledgements, without I/O."""

from __future__ import annotations

import pytest

from kafkette.consumer.share.acknowledgements import GAP, Acknowledgements, batches
from kafkette.consumer.share.record import AcknowledgeType
from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition

TP = TopicPartition("t", 0)
ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)


def test_batches_join_consecutive_offsets_with_one_type_or_one_per_offset() -> None:
    assert batches({}) == []
    assert batches({5: ACCEPT, 6: ACCEPT, 7: ACCEPT}) == [(5, 7, [ACCEPT])]
    assert batches({5: ACCEPT, 6: RELEASE, 9: REJECT, 10: REJECT, 12: GAP}) == [
        (5, 6, [ACCEPT, RELEASE]),
        (9, 10, [REJECT]),
        (12, 12, [GAP]),
    ]


def test_explicit_acknowledgements_are_booked_once_and_taken_once() -> None:
    acks = Acknowledgements()
    acks.delivered(TP, [3, 4, 5], gaps=[6])
    assert not acks.all_acknowledged()
    acks.acknowledge(TP, 3, AcknowledgeType.ACCEPT)
    acks.acknowledge(TP, 5, AcknowledgeType.REJECT)
    assert not acks.all_acknowledged()
    acks.acknowledge(TP, 4, AcknowledgeType.RELEASE)
    assert acks.all_acknowledged()
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        acks.acknowledge(TP, 4, AcknowledgeType.ACCEPT)  # settled already
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        acks.acknowledge(TopicPartition("t", 1), 3, AcknowledgeType.ACCEPT)
    assert acks.take([TP]) == {TP: [(3, 6, [ACCEPT, RELEASE, REJECT, GAP])]}
    assert acks.take([TP]) == {}
    assert not acks.pending()


def test_renew_keeps_the_record_held_and_counts_as_acknowledged() -> None:
    acks = Acknowledgements()
    acks.delivered(TP, [7])
    acks.acknowledge(TP, 7, AcknowledgeType.RENEW)
    assert acks.all_acknowledged()
    assert acks.take([TP]) == {TP: [(7, 7, [RENEW])]}
    acks.acknowledge(TP, 7, AcknowledgeType.ACCEPT)  # still held: settled now
    assert acks.take([TP]) == {TP: [(7, 7, [ACCEPT])]}
    with pytest.raises(IllegalStateError):
        acks.acknowledge(TP, 7, AcknowledgeType.ACCEPT)


def test_implicit_mode_accepts_what_is_unacknowledged() -> None:
    acks = Acknowledgements()
    acks.delivered(TP, [1, 2])
    acks.delivered(TopicPartition("t", 1), [0])
    acks.accept_unacknowledged()
    assert acks.all_acknowledged()
    assert acks.take([TP, TopicPartition("t", 1)]) == {
        TP: [(1, 2, [ACCEPT])],
        TopicPartition("t", 1): [(0, 0, [ACCEPT])],
    }


def test_a_lost_session_forgets_its_records() -> None:
    acks = Acknowledgements()
    acks.delivered(TP, [1, 2])
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT)
    acks.forget([TP])
    assert acks.all_acknowledged() and not acks.pending()
    with pytest.raises(IllegalStateError):
        acks.acknowledge(TP, 2, AcknowledgeType.ACCEPT)
