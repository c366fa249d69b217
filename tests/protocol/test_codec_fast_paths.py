"""The codec's inlined reads and writes, and the cached paths of the header functions.

The compiled code reads one-byte varints, strings, bytes, uuids and empty
tagged sections inline, and hands multi-byte varints and non-empty tagged
sections to the general readers; these tests drive every such branch (lengths
and counts of 128 and more, tagged fields present, known and unknown) and
every truncation, and check the cached header paths against the general ones.
"""

from __future__ import annotations

import re
import struct
import uuid
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.protocol import headers
from kafkette.protocol.codec import _builds_field_by_field, codec_for
from kafkette.protocol.errors import (
    EncodeError,
    InvalidLengthError,
    InvalidStringError,
    TruncatedError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kafkette.protocol.headers import (
    UnsupportedRequestVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_request_frame,
    encode_response,
    encode_response_parts,
)
from kafkette.protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    RequestHeader,
)
from kafkette.protocol.messages import fetch_response as fr
from kafkette.protocol.messages import metadata_response as mr
from kafkette.protocol.messages import produce_request as pq
from kafkette.protocol.messages import produce_response as pr
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.primitives import (
    PartsWriter,
    _uuid_from_bytes_plain,
    _uuid_shortcut_works,
    encode_uvarint,
    uuid_from_bytes,
)
from kafkette.protocol.schema import (
    MAX_VERSION,
    Array,
    Field,
    Message,
    Struct,
)

from .strategies import struct_of
from .test_interop_messages import (
    KAFKA_PYTHON,
    _nested_classes,
    has_default_tagged_struct,
    to_kafka_python,
)

# -- exact bytes through the multi-byte varint branches --------------------------------


def test_long_compact_string_has_a_two_byte_length() -> None:
    """A 200-byte topic name: length 201 is the uvarint c9 01; the decoder reads it back."""
    msg = MetadataRequest(topics=[MetadataRequestTopic(name="a" * 200)])
    encoded = msg.encode(9)
    assert encoded == b"\x02\xc9\x01" + b"a" * 200 + b"\x00" + b"\x01\x00\x00" + b"\x00"
    assert MetadataRequest.decode(encoded, 9) == msg


def test_three_byte_string_length() -> None:
    """20,000 bytes of UTF-8 (10,000 two-byte characters): length 20,001 = a1 9c 01."""
    name = "é" * 10_000
    msg = MetadataRequest(topics=[MetadataRequestTopic(name=name)])
    encoded = msg.encode(9)
    assert encoded[:4] == b"\x02\xa1\x9c\x01"
    assert encoded[4:20_004] == name.encode()
    assert MetadataRequest.decode(encoded, 9) == msg


def test_long_compact_array_has_a_two_byte_count() -> None:
    """130 topics: count 131 is 83 01."""
    msg = MetadataRequest(topics=[MetadataRequestTopic(name="t")] * 130)
    encoded = msg.encode(9)
    assert encoded == b"\x83\x01" + b"\x02t\x00" * 130 + b"\x01\x00\x00\x00"
    assert MetadataRequest.decode(encoded, 9) == msg


@pytest.mark.parametrize("count", [0, 1, 15, 16, 127, 128, 300])
def test_fixed_width_arrays_of_every_size_class(count: int) -> None:
    """int32 arrays below and above the prebuilt structs (16) and the one-byte count (128)."""
    nodes = list(range(-5, count - 5))
    partition = mr.MetadataResponsePartition(
        partition_index=1, leader_id=2, replica_nodes=nodes, isr_nodes=nodes[:1]
    )
    msg = MetadataResponse(topics=[mr.MetadataResponseTopic(name="t", partitions=[partition])])
    encoded = msg.encode(12)
    assert encode_uvarint(count + 1) + struct.pack(f">{count}i", *nodes) in encoded
    assert MetadataResponse.decode(encoded, 12) == msg


def test_long_records_and_bytes() -> None:
    """Records of 16 KiB (a three-byte length) in a flexible ProduceRequest, read as a view."""
    records = bytes(range(256)) * 64
    msg = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[pq.TopicProduceData("t", [pq.PartitionProduceData(3, records)])],
    )
    encoded = msg.encode(11)
    # null transactional id, acks, timeout, 1 topic "t" (tags), 1 partition 3, records
    assert encoded[:16] == b"\x00\xff\xff\x00\x00\x03\xe8\x02\x02t\x02\x00\x00\x00\x03\x81"
    assert encoded[16:18] == b"\x80\x01"  # 16385 = 81 80 01
    decoded = ProduceRequest.decode(encoded, 11)
    view = decoded.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and bytes(view) == records


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview"])
def test_records_of_any_buffer_type_encode_the_same(kind: str) -> None:
    data = bytes(range(200))
    values: dict[str, bytes | bytearray | memoryview] = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
    }
    value = values[kind]
    msg = ProduceRequest(topic_data=[pq.TopicProduceData("t", [pq.PartitionProduceData(0, value)])])
    reference = ProduceRequest(
        topic_data=[pq.TopicProduceData("t", [pq.PartitionProduceData(0, data)])]
    )
    for version in (3, 11):
        assert msg.encode(version) == reference.encode(version)


# -- tagged fields through the inlined section ------------------------------------------


def test_known_tagged_fields_in_nested_structs() -> None:
    """ProduceResponse v11: current_leader (tag 0 of a partition) and node_endpoints (tag 0)."""
    partition = pr.PartitionProduceResponse(
        index=0, base_offset=5, current_leader=pr.LeaderIdAndEpoch(7, 9)
    )
    endpoint = pr.NodeEndpoint(node_id=7, host="h", port=9092, rack=None)
    msg = ProduceResponse(
        responses=[pr.TopicProduceResponse("t", [partition])], node_endpoints=[endpoint]
    )
    encoded = msg.encode(11)
    leader = b"\x01\x00\x09" + struct.pack(">ii", 7, 9) + b"\x00"  # one tag: 0, 9 bytes
    assert leader in encoded
    endpoints = b"\x02" + b"\x00\x00\x00\x07\x02h" + b"\x00\x00\x23\x84" + b"\x00\x00"
    assert encoded.endswith(b"\x01\x00" + bytes([len(endpoints)]) + endpoints)
    assert ProduceResponse.decode(encoded, 11) == msg


def test_unknown_tags_in_a_nested_struct_are_skipped() -> None:
    """A partition with an unknown tag (multi-byte number, 200 bytes) beside its known one."""
    partition = pr.PartitionProduceResponse(index=1, current_leader=pr.LeaderIdAndEpoch(3, 4))
    msg = ProduceResponse(responses=[pr.TopicProduceResponse("t", [partition])])
    encoded = msg.encode(11)
    known = b"\x01\x00\x09" + struct.pack(">ii", 3, 4) + b"\x00"
    assert encoded.count(known) == 1
    forged = encoded.replace(known, b"\x02\x00\x09" + known[3:] + b"\xe7\x07\xc8\x01" + bytes(200))
    assert ProduceResponse.decode(forged, 11) == msg


def test_many_unknown_tags_in_a_struct_without_known_tags() -> None:
    """130 empty unknown tags (a two-byte count) in TopicProduceResponse, which has no tags."""
    msg = ProduceResponse(responses=[pr.TopicProduceResponse("t", [])])
    encoded = msg.encode(11)
    assert encoded.startswith(b"\x02\x02t\x01\x00")  # the topic's empty tagged section
    tags = b"".join(encode_uvarint(tag) + b"\x00" for tag in range(130))
    forged = b"\x02\x02t\x01" + b"\x82\x01" + tags + encoded[5:]
    assert ProduceResponse.decode(forged, 11) == msg


def test_tagged_field_longer_than_its_struct_is_skipped_to_its_end() -> None:
    """A known tagged struct followed by extra bytes inside its tag: the rest is skipped."""
    partition = pr.PartitionProduceResponse(current_leader=pr.LeaderIdAndEpoch(1, 2))
    msg = ProduceResponse(responses=[pr.TopicProduceResponse("t", [partition])])
    encoded = msg.encode(11)
    known = b"\x01\x00\x09" + struct.pack(">ii", 1, 2) + b"\x00"
    forged = encoded.replace(known, b"\x01\x00\x0c" + known[3:] + b"xyz")
    assert ProduceResponse.decode(forged, 11) == msg


def test_tagged_field_reads_stay_inside_the_tag() -> None:
    """A tagged array whose count claims more than the tag holds: refused, not read past."""
    msg = ProduceResponse(node_endpoints=[pr.NodeEndpoint(1, "h", 1, None)])
    encoded = msg.encode(11)
    # node_endpoints as its own tag of 13 bytes: count 2, then 12 bytes; claim 3 elements
    start = encoded.index(b"\x01\x00\x0d\x02")
    forged = encoded[: start + 3] + b"\x04" + encoded[start + 4 :] + bytes(40)
    with pytest.raises(InvalidLengthError, match="cannot fit"):
        ProduceResponse.decode(forged, 11)


def test_default_tagged_struct_is_not_written() -> None:
    """current_leader equal to its default adds no tag (as Kafka); one field off adds it."""
    default = pr.PartitionProduceResponse()
    assert pr.PartitionProduceResponse.FIELDS[-1].name == "current_leader"
    msg = ProduceResponse(responses=[pr.TopicProduceResponse("t", [default])])
    # log start offset -1, no record errors, null message, no tags; topic tags, throttle, tags
    assert msg.encode(11).endswith(b"\xff" * 8 + b"\x01\x00\x00" + b"\x00" + bytes(5))
    changed = pr.PartitionProduceResponse(current_leader=pr.LeaderIdAndEpoch(-1, 0))
    msg = ProduceResponse(responses=[pr.TopicProduceResponse("t", [changed])])
    assert b"\x01\x00\x09\xff\xff\xff\xff\x00\x00\x00\x00\x00" in msg.encode(11)


# -- truncation and bad bytes at every inlined read ---------------------------------------


def _rich_produce_response() -> tuple[bytes, ProduceResponse]:
    partition = pr.PartitionProduceResponse(
        index=0,
        base_offset=1,
        record_errors=[pr.BatchIndexAndErrorMessage(1, "x" * 150)],
        error_message="e" * 130,
        current_leader=pr.LeaderIdAndEpoch(1, 2),
    )
    msg = ProduceResponse(
        responses=[pr.TopicProduceResponse("n" * 140, [partition] * 2)],
        node_endpoints=[pr.NodeEndpoint(1, "h" * 129, 9092, "r")],
    )
    return msg.encode(11), msg


def _rich_fetch_response() -> tuple[bytes, FetchResponse]:
    partition = fr.PartitionData(
        partition_index=2,
        high_watermark=10,
        aborted_transactions=[fr.AbortedTransaction(1, 2)] * 130,
        records=bytes(300),
        diverging_epoch=fr.EpochEndOffset(1, 2),
    )
    topic = fr.FetchableTopicResponse(topic_id=uuid.UUID(int=5), partitions=[partition])
    msg = FetchResponse(responses=[topic], node_endpoints=[fr.NodeEndpoint(1, "h", 2, None)])
    return msg.encode(16), msg


@pytest.mark.parametrize(
    ("make", "version"), [(_rich_produce_response, 11), (_rich_fetch_response, 16)]
)
def test_every_truncation_names_the_message(make: Any, version: int) -> None:
    """Every strict prefix is a TruncatedError naming the message and version.

    Or an InvalidLengthError when a count left in the prefix cannot fit in it
    (refused before any element is read).
    """
    encoded, msg = make()
    cls = type(msg)
    assert cls.decode(encoded, version) == msg
    truncated = 0
    for cut in range(len(encoded)):
        with pytest.raises((TruncatedError, InvalidLengthError)) as info:
            cls.decode(encoded[:cut], version)
        if isinstance(info.value, TruncatedError):
            truncated += 1
            assert str(info.value).startswith(f"{cls.NAME} v{version} is truncated: ")
        else:
            assert "cannot fit" in str(info.value)
    assert truncated > 300


@pytest.mark.parametrize(
    ("body", "version"),
    [
        pytest.param(b"\x03\x02a\x00\xc9", 9, id="inside-a-two-byte-length"),
        pytest.param(b"\x02\xc9\x01" + b"a" * 199, 9, id="inside-a-long-string"),
        pytest.param(b"\x02\x02a", 9, id="before-a-struct-tagged-section"),
        pytest.param(b"\x02\x02a\x00\x01\x00", 9, id="inside-fixed-fields"),
        pytest.param(b"\x02\x02a\x00\x01\x00\x00", 9, id="before-the-tagged-section"),
        pytest.param(b"\x02\x02a\x00\x01\x00\x00\x01\x05", 9, id="inside-a-tag"),
        pytest.param(b"\x02\x02a\x00\x01\x00\x00\x01\x05\x03ab", 9, id="inside-tag-data"),
        pytest.param(b"\x00\x00\x00\x02\x00\x01a\x00", 0, id="inside-an-int16-length"),
        pytest.param(b"\x00\x00\x00\x01\x00\x05ab", 0, id="inside-a-short-string"),
        pytest.param(b"\x00\x00", 0, id="inside-an-array-count"),
    ],
)
def test_truncated_metadata_request(body: bytes, version: int) -> None:
    with pytest.raises(TruncatedError, match=rf"^MetadataRequest v{version} is truncated: "):
        MetadataRequest.decode(body, version)


@pytest.mark.parametrize(
    ("body", "version"),
    [
        pytest.param(b"\x02\x03\xc3\x28\x00\x00\x00\x00\x00", 9, id="compact"),
        pytest.param(b"\x00\x00\x00\x01\x00\x02\xff\xfe", 0, id="int16-length"),
        pytest.param(b"\x02\xc9\x01" + b"a" * 198 + b"\xff\x00\x00\x00\x00\x00", 9, id="long"),
    ],
)
def test_invalid_utf8_names_the_message(body: bytes, version: int) -> None:
    with pytest.raises(InvalidStringError, match=rf"^MetadataRequest v{version}: .*UTF-8"):
        MetadataRequest.decode(body, version)


def test_invalid_utf8_in_a_tagged_string() -> None:
    """ApiVersionsRequest has no tagged string; FetchRequest's tagged cluster_id (tag 0) does."""
    from kafkette.protocol.messages import FetchRequest

    encoded = FetchRequest(cluster_id="ab").encode(12)
    assert encoded.endswith(b"\x01\x00\x03\x03ab")
    with pytest.raises(InvalidStringError, match=r"^FetchRequest v12: "):
        FetchRequest.decode(encoded[:-2] + b"\xc3\x28", 12)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00", "null array for non-nullable field Topics"),
        (b"\x02\x00\x00\x00" + bytes(10), "null where a non-nullable compact string"),
        (b"\xff\xff\xff\xff\x0f", "cannot fit"),
        (b"\xff\xff\xff\xff\x7f", "does not fit in 32 bits"),
    ],
)
def test_invalid_lengths_through_the_inline_paths(body: bytes, message: str) -> None:
    """MetadataResponse v9 (throttle, no brokers, null cluster id, controller), then topics."""
    prefix = bytes(4) + b"\x01" + b"\x00" + bytes(4)
    with pytest.raises(InvalidLengthError, match=message):
        MetadataResponse.decode(prefix + body, 9)


def test_truncated_uuid() -> None:
    """A topic id cut short (the topic's name made it longer than its minimum size)."""
    topic = mr.MetadataResponseTopic(name="x" * 40, topic_id=uuid.UUID(int=2**128 - 1))
    encoded = MetadataResponse(topics=[topic]).encode(12)
    start = encoded.index(b"\xff" * 16)
    for cut in range(start, start + 16):
        with pytest.raises(TruncatedError, match="MetadataResponse v12 is truncated: uuid"):
            MetadataResponse.decode(encoded[:cut], 12)


def test_non_compact_lengths() -> None:
    """Negative lengths other than -1 are refused; -1 is null where the field is nullable."""
    with pytest.raises(InvalidLengthError, match="invalid array length -2"):
        MetadataRequest.decode(b"\xff\xff\xff\xfe", 1)
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1) == MetadataRequest(topics=None)
    with pytest.raises(InvalidLengthError, match="negative length -1 for a non-nullable string"):
        MetadataRequest.decode(b"\x00\x00\x00\x01\xff\xff", 1)
    with pytest.raises(InvalidLengthError, match="invalid string length -2"):
        ProduceRequest.decode(b"\xff\xfe", 3)
    body = struct.pack(">hhi", -1, 1, 1) + struct.pack(">ih", 1, 1) + b"t"
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", -3)
    with pytest.raises(InvalidLengthError, match="invalid records length -3"):
        ProduceRequest.decode(body, 3)
    body = body[:-4] + struct.pack(">i", -1)
    partition = ProduceRequest.decode(body, 3).topic_data[0].partition_data[0]
    assert partition.records is None


def test_encode_errors_through_the_inline_writes() -> None:
    with pytest.raises(EncodeError, match=r"TopicProduceData.name is not nullable"):
        ProduceRequest(topic_data=[pq.TopicProduceData(None, [])]).encode(11)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="cannot encode ProduceRequest v11"):
        ProduceRequest(topic_data=[pq.TopicProduceData(b"t", [])]).encode(11)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="cannot encode ProduceRequest v11"):
        ProduceRequest(topic_data=5).encode(11)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="exceeds the int16 length limit"):
        ProduceRequest(topic_data=[pq.TopicProduceData("t" * 40_000, [])]).encode(3)
    with pytest.raises(EncodeError, match="cannot encode ProduceRequest v11"):
        ProduceRequest(topic_data=[pq.TopicProduceData("\ud800", [])]).encode(11)
    with pytest.raises(EncodeError, match="cannot encode ProduceRequest v11"):
        ProduceRequest(
            topic_data=[pq.TopicProduceData("t", [pq.PartitionProduceData(0, 5)])]  # type: ignore[arg-type]
        ).encode(11)


# -- hypothesis: long values, tagged fields, our round trip and kafka-python's bytes ------

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _primitive(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in _INT_BOUNDS:
        return st.integers(*_INT_BOUNDS[ftype])
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False, width=64)
    if ftype == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if ftype == "string":  # around the one-byte length limit (127 bytes), in bytes
        return st.one_of(st.text(max_size=3), st.text(min_size=126, max_size=140))
    return st.one_of(st.binary(max_size=3), st.binary(min_size=126, max_size=300))


def _value(ftype: Any, version: int, flexible: bool, depth: int) -> st.SearchStrategy[Any]:
    if isinstance(ftype, Array):
        element = _value(ftype.element, version, flexible, depth + 1)
        small = st.lists(element, max_size=2)
        if depth > 0 or not isinstance(ftype.element, str):
            return small  # long arrays of structs would make slow examples
        return st.one_of(small, st.lists(element, min_size=127, max_size=130))
    if isinstance(ftype, str):
        return _primitive(ftype)
    return struct_of(ftype, version, flexible, depth + 1, values=_value)


_FLEXIBLE_LATEST = [
    pytest.param(cls, cls.VALID_VERSIONS[1], id=f"{cls.NAME}-v{cls.VALID_VERSIONS[1]}")
    for key in sorted(REQUESTS)
    for cls in (REQUESTS[key], RESPONSES[key])
    if cls.is_flexible(cls.VALID_VERSIONS[1])
]


@pytest.mark.parametrize(("cls", "version"), _FLEXIBLE_LATEST)
@settings(
    max_examples=3,
    deadline=None,
    # the values are long on purpose (around 128 bytes or elements, the varint boundary)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_long_values_round_trip(cls: type[Message], version: int, data: st.DataObject) -> None:
    """Strings, bytes and arrays around 128 and tagged fields, at each API's newest version."""
    msg = data.draw(struct_of(cls, version, True, values=_value))
    encoded = msg.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == msg
    assert decoded.encode(version) == encoded


_ORACLE_CASES = [
    (MetadataRequest, 12),
    (MetadataResponse, 12),
    (ProduceRequest, 11),
    (ProduceResponse, 11),
    (FetchResponse, 12),
    (ApiVersionsResponse, 3),
]


@pytest.mark.parametrize(("cls", "version"), _ORACLE_CASES, ids=lambda v: str(v))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_long_values_match_kafka_python(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    """kafka-python's encoding of long values decodes to the same object, and equals ours."""
    theirs = KAFKA_PYTHON[cls.NAME]
    msg = data.draw(struct_of(cls, version, True, values=_value))
    their_bytes = bytes(
        to_kafka_python(msg, theirs, _nested_classes(theirs)).encode(version=version)
    )
    assert cls.decode(their_bytes, version) == msg
    if not has_default_tagged_struct(msg, version):
        assert msg.encode(version) == their_bytes


# -- the cached header paths against the general ones ----------------------------------

_CLIENT_IDS = [None, "", "kafkette", "é" * 100]


def _valid_versions(cls: type[Message]) -> range:
    return range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)


def test_request_paths_match_the_general_path_for_every_api_and_version() -> None:
    for key in sorted(REQUESTS):
        request_cls = REQUESTS[key]
        for version in _valid_versions(request_cls):
            request = request_cls()
            for client_id in _CLIENT_IDS:
                body = bytes(encode_request(request, version, -7, client_id))
                frame = encode_request_frame(request, version, -7, client_id)
                assert bytes(frame) == struct.pack(">i", len(body)) + body
                assert (
                    frame[4:]
                    == headers._slow_encode_request_frame(request, version, -7, client_id)[4:]
                )
                header, decoded = decode_request(memoryview(frame)[4:])
                if key == 7 and version == 0:  # header v0 has no client id
                    expected_header = RequestHeader(key, version, -7, "")
                else:
                    expected_header = RequestHeader(key, version, -7, client_id)
                assert header == expected_header
                assert decoded == request
                assert headers._slow_decode_request(frame[4:]) == (header, decoded)


def test_response_paths_match_the_general_path_for_every_api_and_version() -> None:
    for key in sorted(RESPONSES):
        response_cls = RESPONSES[key]
        for version in _valid_versions(response_cls):
            response = response_cls()
            body = bytearray()
            headers._slow_encode_response_into(body, response, version, 123456)
            assert encode_response(response, version, 123456) == body
            assert encode_response_parts(response, version, 123456) == [bytes(body)]
            assert decode_response(body, key, version) == (123456, response)
            assert headers._slow_decode_response(body, key, version) == (123456, response)


def test_response_header_with_tagged_fields_is_skipped() -> None:
    """A response header v1 whose tagged section is not empty: the body is found after it."""
    response = MetadataResponse(cluster_id="c")
    frame = bytearray(encode_response(response, 12, 5))
    assert frame[4] == 0
    frame[4:5] = b"\x02\x01\x02ab\x90\x01\x00"  # tags 1 ("ab") and 144 (empty)
    assert decode_response(frame, 3, 12) == (5, response)
    assert decode_response(bytes(frame), 3, 12) == (5, response)


@pytest.mark.parametrize(
    ("frame", "version", "message"),
    [
        (b"\x00\x00\x01", 12, "ResponseHeader v1 is truncated"),
        (b"\x00\x00\x00\x01", 12, "ResponseHeader v1 is truncated"),
        (b"\x00\x00\x00\x01\x01\x05", 12, "ResponseHeader v1 is truncated"),
        (b"\x00\x00\x00", 8, "ResponseHeader v0 is truncated"),
        (b"\x00\x00\x00\x01\x00", 12, "MetadataResponse v12 is truncated"),
        (b"\x00\x00\x00\x01", 8, "MetadataResponse v8 is truncated"),
    ],
)
def test_truncated_response_frames(frame: bytes, version: int, message: str) -> None:
    with pytest.raises(TruncatedError, match=f"^{message}: "):
        decode_response(frame, 3, version)


def test_truncated_request_frames() -> None:
    frame = bytes(encode_request_frame(MetadataRequest(topics=None), 12, 1, "client"))[4:]
    with pytest.raises(TruncatedError, match=r"^request frame too short"):
        decode_request(frame[:3])
    for cut in range(4, len(frame)):
        name = "RequestHeader v2" if cut < 17 else "MetadataRequest v12"
        with pytest.raises(TruncatedError, match=f"^{name} is truncated: "):
            decode_request(frame[:cut])


def test_invalid_client_id_is_an_invalid_string() -> None:
    frame = bytes(encode_request_frame(MetadataRequest(topics=None), 12, 1, "ab"))[4:]
    with pytest.raises(InvalidStringError, match=r"^RequestHeader v2: "):
        decode_request(frame.replace(b"\x00\x02ab", b"\x00\x02\xc3\x28"))


def test_unknown_keys_and_versions_keep_their_errors() -> None:
    with pytest.raises(UnknownApiKeyError):
        decode_response(b"\x00\x00\x00\x01\x00", 999, 0)
    with pytest.raises(UnsupportedVersionError, match="outside the valid range"):
        decode_response(b"\x00\x00\x00\x01\x00\x00\x00\x00\x00", 3, 99)
    with pytest.raises(UnsupportedVersionError):
        encode_request_frame(MetadataRequest(), 99, 1, None)
    with pytest.raises(UnsupportedVersionError):
        encode_response(MetadataResponse(), 99, 1)
    with pytest.raises(UnsupportedVersionError):
        encode_response_parts(MetadataResponse(), -1, 1)
    frame = struct.pack(">hhih", 0, 12, 44, -1) + b"\x00"
    with pytest.raises(UnsupportedRequestVersionError) as info:
        decode_request(frame)
    assert info.value.header == RequestHeader(0, 12, 44, None)
    with pytest.raises(UnknownApiKeyError):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))
    # a bad version does not leave a cache entry behind: the next call refuses it again
    with pytest.raises(UnsupportedVersionError):
        encode_request_frame(MetadataRequest(), 99, 1, None)
    assert (MetadataRequest, 99) not in headers._request_encoders


def test_header_encode_errors() -> None:
    with pytest.raises(EncodeError, match=r"^cannot encode RequestHeader v2: "):
        encode_request_frame(MetadataRequest(), 12, 2**31, None)
    with pytest.raises(EncodeError, match=r"^cannot encode RequestHeader v2: "):
        encode_request_frame(MetadataRequest(), 12, 1, 5)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="exceeds the int16 length limit"):
        encode_request_frame(MetadataRequest(), 12, 1, "c" * 40_000)
    with pytest.raises(EncodeError, match=r"^cannot encode MetadataRequest v12: "):
        encode_request_frame(MetadataRequest(topics=7), 12, 1, None)  # type: ignore[arg-type]
    for encode in (encode_response, encode_response_parts):
        with pytest.raises(EncodeError, match=r"^cannot encode ResponseHeader v1: "):
            encode(MetadataResponse(), 12, -(2**31) - 1)
        with pytest.raises(EncodeError, match=r"^cannot encode MetadataResponse v12: "):
            encode(MetadataResponse(brokers=3), 12, 1)  # type: ignore[arg-type]


class _Region:
    """An external records region (as a log segment slice)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def to_bytes(self) -> bytes:
        return self.data


def test_external_records_in_response_parts() -> None:
    region = _Region(bytes(range(200)))
    partition = fr.PartitionData(partition_index=0, records=region)  # type: ignore[arg-type]
    response = FetchResponse(responses=[fr.FetchableTopicResponse("t", partitions=[partition])])
    parts = encode_response_parts(response, 12, 9)
    assert len(parts) == 3 and parts[1] is region
    whole = bytes(encode_response(response, 12, 9))
    assert parts[0] + region.data + parts[2] == whole
    assert parts[0].endswith(b"\xc9\x01")  # compact length 201


def test_parts_writer() -> None:
    out = PartsWriter()
    assert out.parts() == []
    out += b"ab"
    assert out.parts() == [b"ab"]
    first, second = _Region(b"1"), _Region(b"2")
    out.add_external(first)
    out.add_external(second)
    assert out.parts() == [b"ab", first, second]
    out += b"cd"
    assert out.parts() == [b"ab", first, second, b"cd"]
    leading = PartsWriter()
    leading.add_external(first)
    assert leading.parts() == [first]
    assert PartsWriter().parts() == []  # a new writer shares nothing with the others


# -- uuids and object construction -------------------------------------------------------


def test_uuid_shortcut_is_in_use() -> None:
    assert _uuid_shortcut_works()
    assert uuid_from_bytes is not _uuid_from_bytes_plain


@settings(max_examples=50)
@given(data=st.binary(min_size=16, max_size=16))
def test_uuid_from_bytes_is_the_constructors_uuid(data: bytes) -> None:
    import copy
    import pickle

    expected = uuid.UUID(bytes=data)
    for make in (uuid_from_bytes, _uuid_from_bytes_plain):
        for source in (data, memoryview(data), bytearray(data)):
            made = make(source)
            assert type(made) is uuid.UUID
            assert made == expected and made.int == expected.int
            assert made.is_safe is expected.is_safe
            assert (str(made), hash(made), made.bytes) == (str(expected), hash(expected), data)
            assert pickle.loads(pickle.dumps(made)) == expected
            assert copy.deepcopy(made) == expected


def test_generated_classes_are_built_field_by_field() -> None:
    for cls in (ProduceResponse, pr.PartitionProduceResponse, mr.MetadataResponsePartition):
        assert _builds_field_by_field(cls)


@attrs.define(slots=True)
class _Validated(Struct):
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    a: int = attrs.field(default=0, validator=attrs.validators.ge(0))


@attrs.define(slots=True)
class _PostInit(Struct):
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    a: int = 0
    seen: ClassVar[list[int]] = []

    def __attrs_post_init__(self) -> None:
        self.seen.append(self.a)


@attrs.define(slots=True)
class _Converted(Struct):
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    a: int = attrs.field(default=0, converter=abs)


class _Plain(Struct):
    __slots__ = ("a",)
    FIELDS: ClassVar[tuple[Field, ...]] = ()

    def __init__(self, a: int = 0) -> None:
        self.a = a * 10


_A = Field("a", "A", "int32", (0, MAX_VERSION), default=0)
for _cls in (_Validated, _PostInit, _Converted, _Plain):
    _cls.FIELDS = (_A,)


def test_classes_with_init_logic_are_built_by_their_constructor() -> None:
    for cls in (_Validated, _PostInit, _Converted, _Plain):
        assert not _builds_field_by_field(cls)
    data = struct.pack(">i", -3)
    with pytest.raises(ValueError, match="must be >= 0"):
        codec_for(_Validated, 0, False)[1](data, 0)
    assert codec_for(_PostInit, 0, False)[1](data, 0) == (_PostInit(-3), 4)
    assert _PostInit.seen[-1] == -3
    assert codec_for(_Converted, 0, False)[1](data, 0)[0].a == 3
    assert codec_for(_Plain, 0, False)[1](data, 0)[0].a == -30


def test_a_differently_ordered_table_uses_the_constructor() -> None:
    @attrs.define(slots=True)
    class Swapped(Struct):
        a: int = 0
        b: int = 0

    Swapped.FIELDS = (
        Field("b", "B", "int32", (0, MAX_VERSION), default=0),
        Field("a", "A", "int32", (0, MAX_VERSION), default=0),
    )
    assert not _builds_field_by_field(Swapped)


def test_compiled_source_uses_the_inline_paths() -> None:
    from kafkette.protocol.codec import generated_source

    source = generated_source(ProduceResponse, 11, True)
    assert "_ruv(buf, pos)" in source and "read_compact" not in source
    assert re.search(r"if buf\[pos\] == 0:\n\s+pos \+= 1", source)
    assert "_new(" in source


def test_client_id_encodings_are_cached_within_a_bound() -> None:
    request = MetadataRequest(topics=None)
    for i in range(150):
        client_id = f"client-{i}" if i % 3 else None
        frame = encode_request_frame(request, 12, i, client_id)
        assert frame[4:] == encode_request(request, 12, i, client_id)
        assert len(headers._client_ids) <= headers._MAX_CLIENT_IDS
    assert headers._client_ids[None] == b"\xff\xff"
    assert headers._client_ids["client-149"] == b"\x00\x0aclient-149"


def test_default_structs_decoded_inline_are_fresh() -> None:
    """Two decodes give distinct default structs (and lists) that compare equal."""
    topic = fr.FetchableTopicResponse(topic="t", partitions=[fr.PartitionData()])
    encoded = FetchResponse(responses=[topic])
    first, second = (FetchResponse.decode(encoded.encode(12), 12) for _ in range(2))
    a, b = first.responses[0].partitions[0], second.responses[0].partitions[0]
    assert a.current_leader == fr.LeaderIdAndEpoch() and a.snapshot_id == fr.SnapshotId()
    assert a.diverging_epoch == fr.EpochEndOffset()
    assert a.current_leader is not b.current_leader
    a.current_leader.leader_id = 5
    assert b.current_leader == fr.LeaderIdAndEpoch()
    decoded = MetadataResponse.decode(
        MetadataResponse(topics=[mr.MetadataResponseTopic()]).encode(0), 0
    )
    assert decoded.topics[0].topic_id == uuid.UUID(int=0)


@attrs.define(slots=True)
class _Leader(pr.LeaderIdAndEpoch):
    """A subclass: attrs' __ne__ tells it from the default instance, whatever its fields."""


def test_tagged_struct_default_test_follows_attrs_equality() -> None:
    def encoded(leader: Any) -> bytes:
        partition = pr.PartitionProduceResponse(current_leader=leader)
        return ProduceResponse(responses=[pr.TopicProduceResponse("t", [partition])]).encode(11)

    tag = b"\x01\x00\x09" + struct.pack(">ii", -1, -1) + b"\x00"
    assert tag not in encoded(pr.LeaderIdAndEpoch(-1, -1))
    assert tag in encoded(_Leader(-1, -1))
    assert b"\x01\x00\x09" + struct.pack(">ii", -1, 3) in encoded(pr.LeaderIdAndEpoch(-1, 3))
    with pytest.raises(EncodeError, match="current_leader is not nullable"):
        encoded(None)


def test_inline_comparison_only_for_attrs_equality() -> None:
    from kafkette.protocol.codec import _has_attrs_eq, _inline_default

    assert _has_attrs_eq(pr.LeaderIdAndEpoch)
    assert _inline_default(pr.LeaderIdAndEpoch) == [("leader_id", -1), ("leader_epoch", -1)]

    @attrs.define(slots=True, eq=False)
    class Loose(Struct):
        a: int = 0

        def __eq__(self, other: object) -> bool:
            return True

    Loose.FIELDS = (_A,)
    assert not _has_attrs_eq(Loose)
    assert _inline_default(ProduceResponse) == [
        ("responses", []),
        ("throttle_time_ms", 0),
        ("node_endpoints", []),
    ]
    assert _inline_default(pr.PartitionProduceResponse) is None  # holds a default struct
