"""Byte-for-byte agreement with kafka-python's and aiokafka's protocol encoders.

kafka-python 3 generates its messages from the same JSON definitions (by its
own code), so every API it implements is compared at every version both
know. aiokafka's messages are hand-written per version; they are compared for
the APIs and versions it has. In both directions: their bytes equal ours, and
our decoder reads their bytes back to the same object.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import aiokafka.protocol
import kafka.protocol
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField

from kafkette.protocol.headers import encode_request
from kafkette.protocol.messages import REQUESTS, RESPONSES
from kafkette.protocol.schema import Array, Message, Struct, in_range

from .strategies import struct_of


def _kafka_python_classes() -> dict[str, type[Any]]:
    classes: dict[str, type[Any]] = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or ".schemas" in info.name:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, ApiMessage)
                and value is not ApiMessage
            ):
                try:
                    classes[value.name] = value
                except Exception:  # abstract helpers without a schema
                    continue
    return classes


KAFKA_PYTHON = _kafka_python_classes()


def _nested_classes(their_cls: type[Any]) -> dict[str, type[Any]]:
    found: dict[str, type[Any]] = {}
    pending = [their_cls]
    while pending:
        cls = pending.pop()
        for name, value in vars(cls).items():
            if isinstance(value, type) and name[:1].isupper() and name not in found:
                found[name] = value
                pending.append(value)
    return found


def to_kafka_python(obj: Struct, their_cls: type[Any], nested: dict[str, type[Any]]) -> Any:
    """Build kafka-python's object with the same field values as ``obj``."""
    known = set(their_cls.fields)
    kwargs = {}
    for field in type(obj).FIELDS:
        # their JSON is an older Kafka revision: some fields are absent or named differently
        name = field.name if field.name in known else _RENAMED.get(field.name)
        if name in known:
            value = _convert(getattr(obj, field.name), field.type, nested)
            if getattr(their_cls.fields[name], "_type", None) is BitField:
                # kafka-python patches some int32 bitfields into sets of bit positions
                value = BitField.from_32_bit_field(value)
            kwargs[name] = value
    return their_cls(**kwargs)


_RENAMED = {
    "cluster_authorized_operations": "authorized_operations",
    "topic_authorized_operations": "authorized_operations",
}


def _convert(value: Any, ftype: Any, nested: dict[str, type[Any]]) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Array):
        return [_convert(v, ftype.element, nested) for v in value]
    if isinstance(ftype, str):
        return bytes(value) if ftype == "records" else value
    return to_kafka_python(value, nested[ftype.__name__], nested)


def _cases() -> list[Any]:
    cases = []
    for key in sorted(REQUESTS):
        for ours in (REQUESTS[key], RESPONSES[key]):
            theirs = KAFKA_PYTHON.get(ours.NAME)
            if theirs is None:
                continue
            low = max(ours.VALID_VERSIONS[0], theirs.min_version)
            high = min(ours.VALID_VERSIONS[1], theirs.max_version)
            cases += [
                pytest.param(ours, theirs, v, id=f"{ours.NAME}-v{v}") for v in range(low, high + 1)
            ]
    return cases


KAFKA_PYTHON_CASES = _cases()


def test_kafka_python_covers_the_required_apis() -> None:
    """The comparison includes the APIs the issue names, with flexible versions."""
    names = {case.values[0].NAME for case in KAFKA_PYTHON_CASES}
    for api in (
        "ApiVersions",
        "Metadata",
        "Produce",
        "Fetch",
        "ListOffsets",
        "JoinGroup",
        "SyncGroup",
        "OffsetCommit",
    ):
        assert f"{api}Request" in names and f"{api}Response" in names
    flexible = [c for c in KAFKA_PYTHON_CASES if c.values[0].is_flexible(c.values[2])]
    assert len(flexible) > 100


def has_default_tagged_struct(obj: Struct, version: int) -> bool:
    """True when ``obj`` holds a tagged struct or uuid field equal to its default at ``version``.

    kafka-python writes such fields; Kafka's generated code omits them (e.g.
    FetchResponseData.write counts currentLeader only when
    ``!currentLeader.equals(new LeaderIdAndEpoch())``, and FetchRequestData
    writes replicaDirectoryId only when it is not ``Uuid.ZERO_UUID``), and so do we.
    """
    for field in type(obj).FIELDS:
        value = getattr(obj, field.name)
        if value is None or not in_range(version, field.versions):
            continue
        if field.tag is not None and isinstance(field.type, type) and value == field.type():
            return True
        if field.tag is not None and field.type == "uuid" and value == field.default:
            return True
        children = value if isinstance(field.type, Array) else [value]
        for child in children:
            if isinstance(child, Struct) and has_default_tagged_struct(child, version):
                return True
    return False


@pytest.mark.parametrize(("ours", "theirs", "version"), KAFKA_PYTHON_CASES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_kafka_python(
    ours: type[Message], theirs: type[Any], version: int, data: st.DataObject
) -> None:
    msg = data.draw(struct_of(ours, version, ours.is_flexible(version)))
    their_msg = to_kafka_python(msg, theirs, _nested_classes(theirs))
    their_bytes = bytes(their_msg.encode(version=version))
    assert ours.decode(their_bytes, version) == msg
    if has_default_tagged_struct(msg, version):
        # kafka-python's deviation (see has_default_tagged_struct): ours is Kafka's encoding.
        assert len(msg.encode(version)) < len(their_bytes)
    else:
        assert msg.encode(version) == their_bytes


def test_default_tagged_struct_is_omitted_as_kafka_does() -> None:
    """FetchResponse v12+: a default currentLeader is not written; kafka-python writes it anyway."""
    from kafkette.protocol.messages import FetchResponse
    from kafkette.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

    msg = FetchResponse(responses=[FetchableTopicResponse(partitions=[PartitionData()])])
    ours = msg.encode(15)
    theirs_cls = KAFKA_PYTHON["FetchResponse"]
    theirs = bytes(to_kafka_python(msg, theirs_cls, _nested_classes(theirs_cls)).encode(version=15))
    assert len(theirs) > len(ours)
    assert FetchResponse.decode(theirs, 15) == msg == FetchResponse.decode(ours, 15)


def test_default_tagged_uuid_is_omitted_as_kafka_does() -> None:
    """FetchRequest v17: a zero replicaDirectoryId is not written; kafka-python writes it."""
    import uuid

    from kafkette.protocol.messages import FetchRequest
    from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState

    theirs_cls = KAFKA_PYTHON["FetchRequest"]
    sizes = []
    for directory in (uuid.UUID(int=0), uuid.UUID(int=5)):
        msg = FetchRequest(
            replica_state=ReplicaState(replica_id=3, replica_epoch=4),
            topics=[FetchTopic(partitions=[FetchPartition(replica_directory_id=directory)])],
        )
        ours = msg.encode(17)
        their_msg = to_kafka_python(msg, theirs_cls, _nested_classes(theirs_cls))
        theirs = bytes(their_msg.encode(version=17))
        assert FetchRequest.decode(theirs, 17) == msg == FetchRequest.decode(ours, 17)
        sizes.append((len(ours), len(theirs)))
    (zero_ours, zero_theirs), (set_ours, set_theirs) = sizes
    assert zero_theirs == set_theirs == set_ours == zero_ours + 18  # tag, size, 16 bytes


def test_request_header_matches_kafka_python() -> None:
    """Header v1 (non-flexible) and v2 (flexible) framing agree with kafka-python."""
    from kafkette.protocol.messages import MetadataRequest

    their_cls = KAFKA_PYTHON["MetadataRequest"]
    for version in (1, 9, 12):
        theirs = their_cls(topics=None, version=version)
        theirs.with_header(correlation_id=7, client_id="kc")
        expected = bytes(theirs.encode(version=version, header=True))
        assert bytes(encode_request(MetadataRequest(topics=None), version, 7, "kc")) == expected


# -- aiokafka: hand-written structs, positional in wire order ---------------------------------


def _aiokafka_class(name: str, version: int) -> type[Any] | None:
    aliases = {
        "ApiVersionsRequest": "ApiVersionRequest",
        "ApiVersionsResponse": "ApiVersionResponse",
        "ListOffsetsRequest": "OffsetRequest",
        "ListOffsetsResponse": "OffsetResponse",
    }
    wanted = f"{aliases.get(name, name)}_v{version}"
    for info in pkgutil.iter_modules(aiokafka.protocol.__path__):
        module = importlib.import_module(f"aiokafka.protocol.{info.name}")
        if hasattr(module, wanted):
            return getattr(module, wanted)  # type: ignore[no-any-return]
    return None


def to_wire_tuple(obj: Struct, version: int) -> Any:
    """``obj``'s fields present at ``version``, in wire order, nested as tuples (aiokafka style).

    aiokafka writes a struct of one field as that field alone (``Array(String)``
    for Metadata v0 topics), which is the same on the wire.
    """
    values = []
    for field in type(obj).FIELDS:
        if not in_range(version, field.versions) or field.tag is not None:
            continue
        values.append(_tuple_value(getattr(obj, field.name), field.type, version))
    return tuple(values)


def _element_value(value: Any, version: int) -> Any:
    fields = to_wire_tuple(value, version)
    return fields[0] if len(fields) == 1 else fields


def _tuple_value(value: Any, ftype: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Array):
        if isinstance(ftype.element, type):
            return [_element_value(v, version) for v in value]
        return [_tuple_value(v, ftype.element, version) for v in value]
    if isinstance(ftype, str):
        return bytes(value) if ftype == "records" else value
    return to_wire_tuple(value, version)


AIOKAFKA_CASES = [
    pytest.param(ours, version, id=f"{ours.NAME}-v{version}")
    for key in (
        18,
        3,
        0,
        1,
        2,
        11,
        14,
        8,
    )  # ApiVersions Metadata Produce Fetch ListOffsets JoinGroup SyncGroup OffsetCommit
    for ours in (REQUESTS[key], RESPONSES[key])
    for version in range(ours.VALID_VERSIONS[0], ours.VALID_VERSIONS[1] + 1)
    if _aiokafka_class(ours.NAME, version) is not None
    # aiokafka declares ListOffsets v4+ current_leader_epoch as Int64; Kafka's schema says int32
    # (see test_aiokafka_list_offsets_v4_defect); the comparison keeps v0-3.
    and not (ours.NAME == "ListOffsetsRequest" and version >= 4)
]


def test_aiokafka_list_offsets_v4_defect() -> None:
    """aiokafka writes ListOffsets v4 CurrentLeaderEpoch in 8 bytes; Kafka (and we) use 4."""
    from aiokafka.protocol.offset import OffsetRequest_v4

    from kafkette.protocol.messages import ListOffsetsRequest
    from kafkette.protocol.messages.list_offsets_request import (
        ListOffsetsPartition,
        ListOffsetsTopic,
    )

    ours = ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsTopic(name="t", partitions=[ListOffsetsPartition(3, 5, 1000)])],
    ).encode(4)
    theirs = bytes(OffsetRequest_v4(-1, 0, [("t", [(3, 5, 1000)])]).encode())
    assert len(theirs) == len(ours) + 4
    # partition 3, epoch 5 as int32, timestamp 1000 as int64
    assert ours.endswith(b"\x00\x00\x00\x03\x00\x00\x00\x05" + (1000).to_bytes(8, "big"))


def test_aiokafka_cases_cover_three_versions_each() -> None:
    names = [case.values[0].NAME for case in AIOKAFKA_CASES]
    for name in {
        "MetadataRequest",
        "ProduceRequest",
        "FetchRequest",
        "ListOffsetsRequest",
        "JoinGroupRequest",
        "SyncGroupRequest",
        "OffsetCommitRequest",
        "ApiVersionsRequest",
    }:
        assert names.count(name) >= 3, name


@pytest.mark.parametrize(("ours", "version"), AIOKAFKA_CASES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_aiokafka(ours: type[Message], version: int, data: st.DataObject) -> None:
    msg = data.draw(struct_of(ours, version, ours.is_flexible(version)))
    their_cls = _aiokafka_class(ours.NAME, version)
    assert their_cls is not None
    their_bytes = bytes(their_cls(*to_wire_tuple(msg, version)).encode())
    assert msg.encode(version) == their_bytes
    assert ours.decode(their_bytes, version) == msg
