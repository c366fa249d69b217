"""Hypothesis strategies for records (shared by the record tests)."""

from __future__ import annotations

from hypothesis import strategies as st

Spec = tuple[int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]

maybe_bytes = st.one_of(st.none(), st.binary(max_size=80))
headers = st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=3).map(tuple)
timestamps = st.integers(min_value=-(1 << 40), max_value=1 << 45)


@st.composite
def record_specs(draw: st.DrawFn, max_size: int = 60) -> list[Spec]:
    """(timestamp, key, value, headers) lists, timestamps near a base as producers make them."""
    base = draw(timestamps)
    spread = draw(st.sampled_from([0, 10, 1000, 1 << 20]))
    n = draw(st.integers(min_value=0, max_value=max_size))
    return [
        (
            base + draw(st.integers(min_value=-spread, max_value=spread)),
            draw(maybe_bytes),
            draw(maybe_bytes),
            draw(headers),
        )
        for _ in range(n)
    ]


@st.composite
def uniform_specs(draw: st.DrawFn) -> list[Spec]:
    """Many records of one shape, the layouts the parser's columnar paths read.

    Records share everything but timestamps, offsets, key, value and header
    value bytes, or (``"varied"``) differ in value length too. A few records may break the
    shape (longer value, a header, a jump in timestamp) so that runs start and
    stop at arbitrary places.
    """
    n = draw(st.integers(min_value=1, max_value=400))
    base = draw(timestamps)
    key_len = draw(st.sampled_from([None, 0, 3, 16, 70]))
    value_len: int | str | None = draw(st.sampled_from([None, 0, 1, 100, 200, "varied"]))
    spread = draw(st.sampled_from([3, 70, 300]))
    ts_step = draw(st.sampled_from([0, 1, 3, 50]))
    header_kind = draw(st.sampled_from([0, 0, 1, 2]))
    odd = set(draw(st.lists(st.integers(min_value=0, max_value=n - 1), max_size=4)))
    specs: list[Spec] = []
    for i in range(n):
        key = None if key_len is None else bytes([i % 251]) * key_len
        value: bytes | None = None
        if isinstance(value_len, str):  # "varied"
            value = bytes([i % 253]) * ((i * 37) % spread)
        elif value_len is not None:
            value = bytes([i % 253]) * value_len
        hdrs: tuple[tuple[str, bytes | None], ...] = ()
        if header_kind == 1:
            hdrs = (("trace-id", bytes([i % 256]) * 16),)
        elif header_kind == 2:
            hdrs = (("a", b"x%02d" % (i % 100)), ("null", None), ("é", b""))
        ts = base + (i * ts_step) // 4
        if i in odd:
            kind = i % 3
            if kind == 0:
                value = (value or b"") + b"!"
            elif kind == 1:
                hdrs = (*hdrs, ("h", b"v"))
            else:
                ts += 100_000
        specs.append((ts, key, value, hdrs))
    return specs
