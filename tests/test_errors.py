"""Tests for kafkette.errors: the error-code table and its exception classes."""

from __future__ import annotations

import inspect
import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkette.errors as errors
from kafkette.errors import (
    ERRORS,
    ApiError,
    AuthenticationError,
    AuthorizationError,
    BufferExhaustedError,
    ConfigError,
    ErrorInfo,
    IllegalStateError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RefreshRetriableError,
    RetriableError,
    SerializationError,
    UnknownKafkaError,
    UnknownTopicOrPartitionError,
    error_for_code,
    make_error,
    raise_for_code,
)

HIGHEST_CODE = 136


def _expected_class_name(kafka_name: str) -> str:
    for suffix in ("_EXCEPTION", "_ERROR"):
        kafka_name = kafka_name.removesuffix(suffix)
    return "".join(part.capitalize() for part in kafka_name.split("_")) + "Error"


def _code_classes() -> dict[int, type[ApiError]]:
    """Every class of the module that declares its own error code."""
    found: dict[int, type[ApiError]] = {}
    for _, obj in inspect.getmembers(errors, inspect.isclass):
        if issubclass(obj, ApiError) and "code" in obj.__dict__:
            assert obj.code not in found, f"two classes for code {obj.code}"
            found[obj.code] = obj
    return found


def _codes_under(base: type[ApiError]) -> set[int]:
    return {code for code, cls in _code_classes().items() if issubclass(cls, base)}


# -- the table ---------------------------------------------------------------


def test_table_covers_every_code_from_minus_one_to_the_highest() -> None:
    """ERRORS holds -1, 0 and every code up to Kafka's highest, each keyed by its own code."""
    assert sorted(ERRORS) == [-1, *range(HIGHEST_CODE + 1)]
    for code, info in ERRORS.items():
        assert isinstance(info, ErrorInfo)
        assert info.code == code


def test_table_names_are_unique_upper_snake_case() -> None:
    """Each row has a distinct UPPER_SNAKE name and a description (NONE's is empty)."""
    names = [info.name for info in ERRORS.values()]
    assert len(set(names)) == len(names)
    for info in ERRORS.values():
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", info.name), info.name
        assert (info.description == "") == (info.code == 0)


def test_table_is_read_only() -> None:
    """ERRORS cannot be modified, nor can its rows."""
    with pytest.raises(TypeError):
        ERRORS[500] = ErrorInfo(500, "X", False, "x")  # type: ignore[index]
    with pytest.raises(AttributeError):
        ERRORS[1].retriable = True  # type: ignore[misc]


# Kafka's documented values (org.apache.kafka.common.protocol.Errors and the
# RetriableException hierarchy).
KNOWN = [
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (5, "LEADER_NOT_AVAILABLE", True),
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (7, "REQUEST_TIMED_OUT", True),
    (10, "MESSAGE_TOO_LARGE", False),
    (15, "COORDINATOR_NOT_AVAILABLE", True),
    (16, "NOT_COORDINATOR", True),
    (22, "ILLEGAL_GENERATION", False),
    (25, "UNKNOWN_MEMBER_ID", False),
    (27, "REBALANCE_IN_PROGRESS", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False),
    (35, "UNSUPPORTED_VERSION", False),
    (36, "TOPIC_ALREADY_EXISTS", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False),
    (47, "INVALID_PRODUCER_EPOCH", False),
    (48, "INVALID_TXN_STATE", False),
    (51, "CONCURRENT_TRANSACTIONS", True),
    (59, "UNKNOWN_PRODUCER_ID", False),
    (74, "FENCED_LEADER_EPOCH", True),
    (75, "UNKNOWN_LEADER_EPOCH", True),
    (79, "MEMBER_ID_REQUIRED", False),
    (82, "FENCED_INSTANCE_ID", False),
    (88, "UNSTABLE_OFFSET_COMMIT", True),
    (90, "PRODUCER_FENCED", False),
    (100, "UNKNOWN_TOPIC_ID", True),
    (110, "FENCED_MEMBER_EPOCH", False),
    (113, "STALE_MEMBER_EPOCH", False),
    (120, "TRANSACTION_ABORTABLE", False),
    (133, "SHARE_SESSION_LIMIT_REACHED", True),
]


@pytest.mark.parametrize(("code", "name", "retriable"), KNOWN)
def test_well_known_codes(code: int, name: str, retriable: bool) -> None:
    """Spot check of well-known codes: number, name and retriable flag."""
    info = ERRORS[code]
    assert (info.name, info.retriable) == (name, retriable)
    cls = error_for_code(code)
    assert cls is not None
    assert (cls.code, cls.name, cls.retriable) == (code, name, retriable)


def test_exact_descriptions() -> None:
    """A few descriptions are Kafka's default text, verbatim."""
    assert ERRORS[1].description == (
        "The requested offset is not within the range of offsets maintained by the server."
    )
    assert ERRORS[3].description == "This server does not host this topic-partition."
    assert ERRORS[7].description == "The request timed out."
    assert ERRORS[27].description == "The group is rebalancing, so a rejoin is needed."


def test_exactly_32_codes_are_retriable() -> None:
    """The retriable codes are exactly those whose Java exception is a RetriableException."""
    assert sorted(code for code, info in ERRORS.items() if info.retriable) == [
        2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71,
        72, 74, 75, 78, 80, 83, 84, 88, 89, 100, 103, 106, 122, 123, 133,
    ]  # fmt: skip


# -- classes against the table ---------------------------------------------------


def test_every_code_but_none_has_exactly_one_class() -> None:
    """The classes declaring a code are exactly the table's codes, NONE excepted."""
    assert sorted(_code_classes()) == sorted(set(ERRORS) - {0})


def test_classes_agree_with_the_table() -> None:
    """Each class's name, description, retriable flag, base and lookup match its row."""
    for code, cls in _code_classes().items():
        info = ERRORS[code]
        assert cls.__name__ == _expected_class_name(info.name)
        assert (cls.name, cls.description, cls.retriable) == (
            info.name,
            info.description,
            info.retriable,
        )
        assert issubclass(cls, RetriableError) == info.retriable, cls
        assert issubclass(cls, KafkaError)
        assert error_for_code(code) is cls
        assert cls.__doc__ == f"{info.name} ({code}): {info.description}"
        assert cls.__name__ in errors.__all__


def test_class_names_follow_the_naming_rule() -> None:
    """Suffixes _EXCEPTION and _ERROR are dropped before Error is appended."""
    assert error_for_code(-1) is errors.UnknownServerError
    assert error_for_code(13) is errors.NetworkError
    assert error_for_code(17) is errors.InvalidTopicError
    assert error_for_code(56) is errors.KafkaStorageError
    assert error_for_code(106) is errors.FetchSessionTopicIdError
    assert error_for_code(6) is NotLeaderOrFollowerError


def test_invalid_metadata_group() -> None:
    """InvalidMetadataError groups the codes that tell a client to refresh its metadata."""
    assert _codes_under(InvalidMetadataError) == {
        3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103,
    }  # fmt: skip
    assert _codes_under(RefreshRetriableError) == _codes_under(InvalidMetadataError) | {15, 16}
    assert issubclass(InvalidMetadataError, RetriableError)


def test_authorization_and_authentication_groups() -> None:
    """ACL failures and SASL failures each have a common base."""
    assert _codes_under(AuthorizationError) == {29, 30, 31, 53, 65}
    assert _codes_under(AuthenticationError) == {33, 34, 58}


def test_a_class_disagreeing_with_the_table_is_rejected() -> None:
    """Defining a code class inconsistent with the table fails at class creation."""
    with pytest.raises(TypeError, match="RetriableError base disagrees"):

        class NotRetriableTimeout(ApiError):
            code = 7

    with pytest.raises(TypeError, match="RetriableError base disagrees"):

        class RetriableOutOfRange(ApiError, RetriableError):
            code = 1

    with pytest.raises(TypeError, match="already has OffsetOutOfRangeError"):

        class SecondOutOfRange(ApiError):
            code = 1

    with pytest.raises(TypeError, match="not an error code"):

        class Invented(ApiError):
            code = 5000

    with pytest.raises(TypeError, match="not an error code"):

        class NoError(ApiError):
            code = 0

    assert error_for_code(7) is errors.RequestTimedOutError
    assert error_for_code(1) is OffsetOutOfRangeError


def test_all_names_exist() -> None:
    """Every name in __all__ is defined, and every public class is in __all__."""
    for name in errors.__all__:
        assert hasattr(errors, name), name
    public_classes = {
        name
        for name, obj in inspect.getmembers(errors, inspect.isclass)
        if obj.__module__ == errors.__name__ and not name.startswith("_")
    }
    assert public_classes <= set(errors.__all__)


# -- lookup and raising --------------------------------------------------------


def test_none_is_not_an_error() -> None:
    """Code 0 is in the table but has no class; raise_for_code(0) does nothing."""
    assert ERRORS[0].name == "NONE"
    assert error_for_code(0) is None
    raise_for_code(0)
    raise_for_code(0, "ignored")
    with pytest.raises(ValueError, match="NONE"):
        make_error(0)


def test_raise_for_code_raises_the_class_with_detail() -> None:
    """raise_for_code raises the code's class; its message has name, description and detail."""
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        raise_for_code(3, "topic 'orders' partition 7")
    exc = info.value
    assert type(exc) is UnknownTopicOrPartitionError
    assert exc.code == 3
    assert exc.retriable is True
    assert exc.detail == "topic 'orders' partition 7"
    assert str(exc) == (
        "UNKNOWN_TOPIC_OR_PARTITION (3): This server does not host this topic-partition. "
        "(topic 'orders' partition 7)"
    )
    assert isinstance(exc, InvalidMetadataError)


def test_message_without_detail() -> None:
    """Without a detail, the message is the name, the code and Kafka's description."""
    exc = OffsetOutOfRangeError()
    assert exc.detail is None
    assert exc.args == ()
    assert str(exc) == (
        "OFFSET_OUT_OF_RANGE (1): The requested offset is not within the range of offsets "
        "maintained by the server."
    )


def test_make_error_builds_without_raising() -> None:
    """make_error returns the instance, for a response's per-partition error, say."""
    exc = make_error(27, "generation 4")
    assert type(exc) is errors.RebalanceInProgressError
    assert (exc.code, exc.retriable, exc.detail) == (27, False, "generation 4")


def test_unknown_code_is_carried_not_crashed_on() -> None:
    """A code missing from the table becomes UnknownKafkaError with that number."""
    assert error_for_code(4242) is UnknownKafkaError
    with pytest.raises(UnknownKafkaError) as info:
        raise_for_code(4242, "from a newer broker")
    exc = info.value
    assert exc.code == 4242
    assert exc.retriable is False
    assert exc.name == "UNKNOWN_ERROR_CODE"
    assert isinstance(exc, ApiError)
    assert str(exc) == (
        "UNKNOWN_ERROR_CODE (4242): Error code 4242 is not known to this version of kafkette. "
        "(from a newer broker)"
    )
    assert repr(exc) == "UnknownKafkaError('from a newer broker', code=4242)"
    with pytest.raises(TypeError):
        UnknownKafkaError("the code is required")  # type: ignore[call-arg]


@settings(max_examples=50)
@given(st.integers(min_value=-(2**15), max_value=2**15 - 1).filter(lambda c: c not in ERRORS))
def test_any_unknown_int16_code(code: int) -> None:
    """Every int16 outside the table maps to UnknownKafkaError keeping its code."""
    exc = make_error(code)
    assert type(exc) is UnknownKafkaError
    assert exc.code == code
    assert str(code) in str(exc)


@settings(max_examples=50)
@given(st.sampled_from(sorted(set(ERRORS) - {0})), st.none() | st.text(max_size=20))
def test_known_codes_round_trip(code: int, detail: str | None) -> None:
    """make_error(code).code is code for every known code, with or without a detail."""
    exc = make_error(code, detail)
    assert exc.code == code
    assert exc.detail == detail
    assert str(exc).startswith(f"{ERRORS[code].name} ({code}): ")


@pytest.mark.parametrize(
    "exc",
    [
        NotLeaderOrFollowerError("orders-3"),
        OffsetOutOfRangeError(),
        UnknownKafkaError("new", code=999),
        UnknownKafkaError(code=998),
        ConfigError("acks", "must be one of 0, 1, -1, all"),
        KafkaTimeoutError("metadata for 'orders' after 60 s"),
    ],
)
def test_errors_pickle(exc: KafkaError) -> None:
    """Errors survive pickling (they cross process pools and thread boundaries)."""
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    assert copy.code == exc.code
    assert copy.detail == exc.detail


# -- client-side errors --------------------------------------------------------


def test_config_error_names_the_setting() -> None:
    """ConfigError is a ValueError naming the setting and the reason."""
    exc = ConfigError("enable.idempotence", "requires acks=all")
    assert isinstance(exc, ValueError)
    assert isinstance(exc, KafkaError)
    assert exc.setting == "enable.idempotence"
    assert exc.reason == "requires acks=all"
    assert exc.code is None
    assert exc.retriable is False
    assert str(exc) == "configuration setting 'enable.idempotence': requires acks=all"


def test_client_side_errors() -> None:
    """Client-side errors have no code; timeouts and connection errors are retriable."""
    assert KafkaTimeoutError().code is None
    assert str(KafkaTimeoutError()) == "The operation did not complete within its timeout."
    assert str(KafkaTimeoutError("flush after 5.0 s")) == "flush after 5.0 s"
    assert issubclass(KafkaTimeoutError, RetriableError)
    assert issubclass(KafkaConnectionError, RetriableError)
    assert issubclass(BufferExhaustedError, KafkaTimeoutError)
    assert BufferExhaustedError().retriable is True
    assert IllegalStateError("producer is closed").retriable is False
    assert str(IllegalStateError("producer is closed")) == "producer is closed"
    assert not issubclass(SerializationError, RetriableError)
    for cls in (
        KafkaTimeoutError,
        KafkaConnectionError,
        ConfigError,
        IllegalStateError,
        SerializationError,
    ):
        assert not issubclass(cls, ApiError)
        assert issubclass(cls, KafkaError)
