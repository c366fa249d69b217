"""Every generated message round-trips at every valid version."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.protocol import messages
from kafkette.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kafkette.protocol.messages import REQUESTS, RESPONSES, MetadataRequest
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.schema import Message

from .strategies import struct_of

MESSAGE_CLASSES: list[type[Message]] = [
    getattr(messages, name)
    for name in messages.__all__
    if isinstance(getattr(messages, name), type) and issubclass(getattr(messages, name), Message)
]
CASES = [
    pytest.param(cls, version, id=f"{cls.NAME}-v{version}")
    for cls in MESSAGE_CLASSES
    for version in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def test_registry_is_complete() -> None:
    """Every API key has a request and a response class, paired with each other."""
    assert set(REQUESTS) == set(RESPONSES)
    assert len(REQUESTS) >= 80
    for key, request_cls in REQUESTS.items():
        assert key == request_cls.API_KEY
        assert request_cls.RESPONSE is RESPONSES[key]


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls: type[Message], version: int, data: st.DataObject) -> None:
    """Random valid values encode, decode to an equal object, and re-encode to the same bytes."""
    msg = data.draw(struct_of(cls, version, cls.is_flexible(version)))
    encoded = msg.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == msg
    assert decoded.encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_defaults_round_trip(cls: type[Message], version: int) -> None:
    """A default-constructed message round-trips (empty collections, nulls, default tags)."""
    msg = cls()
    assert cls.decode(msg.encode(version), version) == msg


@pytest.mark.parametrize(
    ("cls", "version"), [c for c in CASES if c.values[0].is_flexible(c.values[1])]
)
def test_unknown_tagged_fields_are_skipped(cls: type[Message], version: int) -> None:
    """An unknown tag in the top-level tagged section is skipped on read."""
    msg = cls()
    encoded = msg.encode(version)
    assert encoded.endswith(b"\x00")  # no tagged field set: an empty section
    # one tagged field, tag 999 (uvarint e7 07), three bytes of data
    forged = encoded[:-1] + b"\x01\xe7\x07\x03abc"
    assert cls.decode(forged, version) == msg


def test_metadata_request_exact_bytes() -> None:
    """Known encodings of MetadataRequest v0 (non-flexible) and v9 (flexible, compact)."""
    msg = MetadataRequest(topics=[MetadataRequestTopic(name="a")], allow_auto_topic_creation=False)
    assert msg.encode(9) == b"\x02\x02a\x00\x00\x00\x00\x00"
    assert MetadataRequest(topics=[MetadataRequestTopic(name="ab")]).encode(0) == (
        b"\x00\x00\x00\x01\x00\x02ab"
    )


def test_field_absent_at_version_is_rejected() -> None:
    """A non-default, non-ignorable field cannot be silently dropped at an old version."""
    from kafkette.protocol.messages import ProduceRequest

    with pytest.raises(UnsupportedVersionError, match="transactional_id"):
        ProduceRequest(transactional_id="tx").encode(2)


def test_null_in_non_nullable_field_is_rejected() -> None:
    with pytest.raises(EncodeError, match="name"):
        MetadataRequest(topics=[MetadataRequestTopic(name=None)]).encode(9)


def test_wrong_type_is_an_encode_error() -> None:
    with pytest.raises(EncodeError):
        MetadataRequest(topics=[MetadataRequestTopic(name=5)]).encode(1)  # type: ignore[arg-type]


def test_out_of_range_int_is_an_encode_error() -> None:
    from kafkette.protocol.messages import ApiVersionsResponse

    with pytest.raises(EncodeError):
        ApiVersionsResponse(error_code=70000).encode(0)


def test_version_outside_valid_range() -> None:
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest().encode(99)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest.decode(b"", -1)


@pytest.mark.parametrize(("cls", "version"), CASES[::7])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_every_truncation_is_a_decode_error(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    """Every strict prefix of an encoding fails with a DecodeError, never another exception."""
    msg = data.draw(struct_of(cls, version, cls.is_flexible(version)))
    encoded = msg.encode(version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.decode(encoded[:cut], version)
