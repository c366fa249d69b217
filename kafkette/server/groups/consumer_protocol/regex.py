"""Topic regular expressions from clients (SubscribedTopicRegex), compiled with RE2 and
matched at most once per topic name.

Kafka compiles a subscription with RE2/J (``Pattern.compile``) and keeps the topics whose
whole name matches (``matcher(name).matches()``). RE2 (google-re2, the C++ library RE2/J
was ported from) has the same syntax and the same answers, and its matching time is linear
in the name, so any pattern a client sends is safe to match: there is no limit of our own.
A pattern RE2 refuses (backreferences, lookaround, an unclosed group, a repeat count above
1000, ...) is INVALID_REGULAR_EXPRESSION with Kafka's message,
``SubscribedTopicRegex `P` is not a valid regular expression: D.``, where ``D`` is the
description RE2/J gives for that error (RE2's wording mapped to RE2/J's).

Where the two differ: RE2 refuses a pattern whose program needs more than its memory
budget (8 MiB, e.g. ``\\pL{1000}``) and a nested repeat whose total count passes 1000,
which RE2/J compiles; RE2 accepts ``\\C`` (any byte), which RE2/J refuses.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]

from kafkette.errors import InvalidRegularExpressionError

MAX_CACHED_PATTERNS = 256

_RE2J_DESCRIPTIONS = {
    "unexpected error": "regexp/syntax: internal error",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    # RE2/J finds a ')' without its '(' when its stack underflows.
    "unexpected )": "regexp/syntax: internal error",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}
"""RE2's error texts (before the ``: fragment``) and RE2/J's descriptions of the same."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern on stderr
    return options


_OPTIONS = _options()


def _description(error: BaseException) -> str:
    """RE2/J's description of the error RE2 raised (RE2's own text where RE2/J has none)."""
    raw = error.args[0] if error.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    code = text.split(": ", 1)[0]
    return _RE2J_DESCRIPTIONS.get(code, code)


def refusal(pattern: str, description: str) -> InvalidRegularExpressionError:
    """INVALID_REGULAR_EXPRESSION with Kafka's message."""
    return InvalidRegularExpressionError(
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    )


@lru_cache(maxsize=MAX_CACHED_PATTERNS)
def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2, or INVALID_REGULAR_EXPRESSION as Kafka words it."""
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise refusal(pattern, "invalid UTF-8") from None
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        raise refusal(pattern, _description(e)) from None


_verdicts: OrderedDict[str, dict[str, bool]] = OrderedDict()


def regex_matches(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The names that ``pattern`` matches in full (each name tried once per pattern)."""
    compiled = compile_regex(pattern)
    verdicts = _verdicts.get(pattern)
    if verdicts is None:
        verdicts = _verdicts[pattern] = {}
        if len(_verdicts) > MAX_CACHED_PATTERNS:
            _verdicts.popitem(last=False)
    else:
        _verdicts.move_to_end(pattern)
    matched = []
    for name in names:
        verdict = verdicts.get(name)
        if verdict is None:
            verdict = verdicts[name] = compiled.fullmatch(name) is not None
        if verdict:
            matched.append(name)
    return frozenset(matched)
