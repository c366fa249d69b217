"""Topic regular expressions from clients (SubscribedTopicRegex), checked so that matching
them cannot stall the broker, and matched at most once per topic name.

Kafka matches with RE2J, whose time is linear in the name. Python's ``re`` backtracks, so
a pattern such as ``(a+)+x`` or ``.*.*.*.*x`` takes exponential or high-polynomial time on
a 249-character topic name. A pattern is refused with INVALID_REGULAR_EXPRESSION when:

- it uses what RE2 does not have either: lookaround, backreferences, conditionals,
  atomic groups, possessive quantifiers;
- a repetition contains another repetition or an alternation (``(a+)+``, ``(a|ab)*``);
- it has more than :data:`MAX_REPEATS` repetitions (``*``, ``+``, or ``{m,n}`` with
  n > 1; ``?`` does not count), which keeps the work per name near 249 ** MAX_REPEATS
  steps. This limit is kafkette's own: Kafka accepts any RE2 pattern.

Character classes (``[a-z]+``) and alternations outside repetitions are fine.
"""

from __future__ import annotations

import importlib
import re
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from kafkette.errors import InvalidRegularExpressionError

MAX_REPEATS = 2
"""Repetitions allowed in one pattern."""
MAX_CACHED_PATTERNS = 256

_NOT_IN_RE2 = {
    "ASSERT": "lookaround assertions",
    "ASSERT_NOT": "lookaround assertions",
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditionals",
    "ATOMIC_GROUP": "atomic groups",
    "POSSESSIVE_REPEAT": "possessive quantifiers",
}
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _sre_parser() -> Any:
    try:
        return importlib.import_module("re._parser")
    except ImportError:  # Python 3.10
        return importlib.import_module("sre_parse")


def _refuse(pattern: str, why: str) -> InvalidRegularExpressionError:
    return InvalidRegularExpressionError(f"SubscribedTopicRegex {pattern!r} is invalid: {why}")


@lru_cache(maxsize=MAX_CACHED_PATTERNS)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or INVALID_REGULAR_EXPRESSION saying why."""
    try:
        compiled = re.compile(pattern)
        tree = _sre_parser().parse(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise _refuse(pattern, str(e)) from None
    repeats = _walk(pattern, tree, inside_repeat=False)
    if repeats > MAX_REPEATS:
        raise _refuse(
            pattern, f"more than {MAX_REPEATS} repetitions (*, +, {{m,n}}) are not accepted"
        )
    return compiled


def _walk(pattern: str, items: Any, inside_repeat: bool) -> int:
    """Check a parsed (sub)pattern; the number of repetitions in it."""
    repeats = 0
    for op, arg in items:
        name = str(op)
        if name in _NOT_IN_RE2:
            raise _refuse(pattern, f"{_NOT_IN_RE2[name]} are not supported")
        if name in _REPEATS:
            _low, high, body = arg
            if high > 1:
                if inside_repeat:
                    raise _refuse(pattern, "a repetition inside a repetition is not accepted")
                repeats += 1
            repeats += _walk(pattern, body, inside_repeat or high > 1)
        elif name == "SUBPATTERN":
            repeats += _walk(pattern, arg[-1], inside_repeat)
        elif name == "BRANCH":
            if inside_repeat:
                raise _refuse(pattern, "an alternation inside a repetition is not accepted")
            for branch in arg[1]:
                repeats += _walk(pattern, branch, inside_repeat)
    return repeats


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
