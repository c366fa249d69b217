"""Topic regexes: full matches, and patterns that could stall a backtracking matcher
refused with INVALID_REGULAR_EXPRESSION saying why."""

from __future__ import annotations

import pytest

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
        ("", []),
    ],
)
def test_whole_names_are_matched(pattern: str, matched: list[str]) -> None:
    assert sorted(regex_matches(pattern, TOPICS)) == matched


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("orders-(", "missing ), unterminated subpattern at position 7"),
        ("(a+)+x", "a repetition inside a repetition is not accepted"),
        ("(?:a{2})*", "a repetition inside a repetition is not accepted"),
        ("(a|ab)*c", "an alternation inside a repetition is not accepted"),
        (".*.*.*x", "more than 2 repetitions (*, +, {m,n}) are not accepted"),
        ("[a-z]+-[a-z]+-[0-9]+", "more than 2 repetitions (*, +, {m,n}) are not accepted"),
        ("(?=orders).*", "lookaround assertions are not supported"),
        ("(?<!x)orders", "lookaround assertions are not supported"),
        (r"(o)rders-\1", "backreferences are not supported"),
        ("(o)?(?(1)rders|x)", "conditionals are not supported"),
        ("(?>orders)", "atomic groups are not supported"),
        ("orders.*+", "possessive quantifiers are not supported"),
    ],
)
def test_risky_or_non_re2_patterns_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(InvalidRegularExpressionError) as info:
        compile_regex(pattern)
    assert info.value.detail == f"SubscribedTopicRegex {pattern!r} is invalid: {why}"


def test_verdicts_follow_new_names() -> None:
    """A name seen later is tried then; names seen before keep their verdict."""
    assert regex_matches("t-.*", ["t-1", "u-1"]) == {"t-1"}
    assert regex_matches("t-.*", ["t-1", "u-1", "t-2"]) == {"t-1", "t-2"}
    assert regex_matches("t-.*", ["u-1"]) == frozenset()
