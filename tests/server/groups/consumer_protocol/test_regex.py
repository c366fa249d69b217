"""Topic regexes compiled with RE2 as Kafka compiles them with RE2/J: full matches, any
pattern RE2 accepts (no limit of our own), and what RE2 refuses refused with Kafka's
INVALID_REGULAR_EXPRESSION message."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.errors import InvalidRegularExpressionError
from kafkette.server.groups.consumer_protocol.regex import compile_regex, regex_matches

TOPICS = ["orders-1", "orders-22", "orders-x", "payments-1", "orders", "xorders-1"]


@pytest.mark.parametrize(
    ("pattern", "matched"),
    [
        (r"orders-\d+", ["orders-1", "orders-22"]),
        ("orders.*", ["orders", "orders-1", "orders-22", "orders-x"]),
        ("(orders|payments)-1", ["orders-1", "payments-1"]),
        ("[op][a-z]+-[0-9]", ["orders-1", "payments-1"]),
        ("(?:x|)orders-1", ["orders-1", "xorders-1"]),
        ("orders", ["orders"]),
        ("^orders$", ["orders"]),
        ("(?i)ORDERS-X", ["orders-x"]),
        ("", []),
        # Patterns the old home-made limits refused; RE2 (and Kafka) accept them.
        ("(o+)+rders-1", ["orders-1"]),
        ("(orders|payments)*-1", ["orders-1", "payments-1"]),
        ("[a-z]+[a-z]*[a-z]+-[0-9]+", ["orders-1", "orders-22", "payments-1", "xorders-1"]),
    ],
)
def test_whole_names_are_matched(pattern: str, matched: list[str]) -> None:
    assert sorted(regex_matches(pattern, TOPICS)) == matched


def test_librdkafka_0033_pattern() -> None:
    """librdkafka's test 0033 subscribes to ``^.*[tToOpPiIcC]_0+[12]_[^_]+_<group>``: the
    TOPIC_0001 and topic_0002 topics of its run, not TOOTHPIC_0003 nor another run's."""
    group = "4f2a6c01d9e3b7a5"
    topics = [
        f"rdkafkatest_rnd1a2b3c4d_regex_subscribe_TOPIC_0001_UNO_{group}",
        f"rdkafkatest_rnd1a2b3c4d_regex_subscribe_topic_0002_dup_{group}",
        f"rdkafkatest_rnd1a2b3c4d_regex_subscribe_TOOTHPIC_0003_3_{group}",
        "rdkafkatest_rnd1a2b3c4d_regex_subscribe_TOPIC_0001_UNO_0000000000000000",
        f"rdkafkatest_rnd1a2b3c4d_regex_subscribe_TOPIC_0001_UNO_x_{group}",
    ]
    pattern = f"^.*[tToOpPiIcC]_0+[12]_[^_]+_{group}"
    assert regex_matches(pattern, topics) == set(topics[:2])
    assert regex_matches(f"^.*TOOTHPIC_000._._{group}", topics) == {topics[2]}
    assert regex_matches(f"^.*_000[34]_..?_{group}", topics) == {topics[2]}
    assert regex_matches(f"^.*_{group}", topics) == {topics[0], topics[1], topics[2], topics[4]}


def test_patterns_that_stall_a_backtracking_matcher_take_linear_time() -> None:
    """``(a+)+x`` on 249 ``a``: exponential for Python's re, instant for RE2."""
    started = time.monotonic()
    assert regex_matches("(a+)+x", ["a" * 249, "a" * 248 + "x"]) == {"a" * 248 + "x"}
    assert regex_matches("(a|aa)*b", ["a" * 249]) == frozenset()
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("pattern", "description"),
    [
        (r"(a)\1", "invalid escape sequence"),
        ("(?=a)", "invalid or unsupported Perl syntax"),
        ("(?<!x)orders", "invalid or unsupported Perl syntax"),
        ("(?>orders)", "invalid or unsupported Perl syntax"),
        ("(o)?(?(1)rders|x)", "invalid or unsupported Perl syntax"),
        ("orders-(", "missing closing )"),
        ("^.*[0", "missing closing ]"),
        ("orders)", "regexp/syntax: internal error"),
        ("orders\\", "trailing backslash at end of expression"),
        ("*orders", "missing argument to repetition operator"),
        ("orders.*+", "invalid nested repetition operator"),
        ("orders**", "invalid nested repetition operator"),
        ("a{1001}", "invalid repeat count"),
        ("[z-a]", "invalid character class range"),
        (r"\pX", "invalid character class range"),
        ("(?P<>a)", "invalid named capture"),
        (r"orders\Z", "invalid escape sequence"),
    ],
)
def test_what_re2_refuses_is_refused_with_kafkas_message(pattern: str, description: str) -> None:
    with pytest.raises(InvalidRegularExpressionError) as info:
        compile_regex(pattern)
    assert info.value.detail == (
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    )


def test_verdicts_follow_new_names() -> None:
    """A name seen later is tried then; names seen before keep their verdict."""
    assert regex_matches("t-.*", ["t-1", "u-1"]) == {"t-1"}
    assert regex_matches("t-.*", ["t-1", "u-1", "t-2"]) == {"t-1", "t-2"}
    assert regex_matches("t-.*", ["u-1"]) == frozenset()


# Patterns in the subset where RE2 and Python's re have the same syntax and, for whole
# matches of ASCII topic names, the same answers.
_ALPHABET = "ab_.-1"
_atoms = st.sampled_from(
    ["a", "b", "_", "-", "1", r"\.", ".", "[ab]", "[^_]", "[a-b1]", r"\d", r"\w", "[._-]"]
)


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quantifier = st.sampled_from(["", "", "*", "+", "?", "{2}", "{0,2}", "{1,}", "*?", "+?"])
    group = st.builds(lambda s, kind: f"({kind}{s})", inner, st.sampled_from(["", "?:"]))
    return st.builds(lambda atom, q: atom + q, st.one_of(_atoms, group), quantifier)


_patterns = st.recursive(
    _quantified(st.just("a")),
    lambda inner: st.one_of(
        st.lists(_quantified(inner), min_size=1, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
        _quantified(inner),
    ),
    max_leaves=8,
)
_anchored = st.builds(
    lambda start, p, end: start + p + end,
    st.sampled_from(["", "^"]),
    _patterns,
    st.sampled_from(["", "$"]),
)


@settings(max_examples=300, deadline=None)
@given(pattern=_anchored, names=st.lists(st.text(_ALPHABET, max_size=8), max_size=12))
def test_re2_and_python_re_agree_on_whole_names(pattern: str, names: list[str]) -> None:
    python = re.compile(pattern)
    expected = {name for name in names if python.fullmatch(name)}
    assert regex_matches(pattern, names) == expected
