"""Record batch encode/decode throughput: kafkette vs kafka-python vs aiokafka.

Run: ``.venv/bin/python bench/codec.py [--records N] [--rounds R]``

Workload: N records (default 1,000,000) with 100-byte values, in batches of
1,000, without keys and with 16-byte keys, uncompressed and lz4. Timestamps
advance 1 ms every 10 records, as a busy producer's would.

- encode: create a builder, append 1,000 records, build the batch bytes.
- decode: walk a buffer holding all the batches (as a fetch response does),
  check each batch's CRC (every peer's consumer does by default), and produce
  every record's offset, timestamp, key, value and headers as Python objects.
  The batches decoded are the ones aiokafka built, the same bytes for all.

Each (implementation, case) is timed ``--rounds`` times, interleaved, and
the best round counts. Times are this process's CPU time
(``time.process_time``), not wall-clock time: the machine is shared, and CPU
time leaves out the moments other processes hold the core.
"""

from __future__ import annotations

import argparse
import gc
import time
import warnings
from collections.abc import Callable
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import aiokafka.record.default_records as aio_default
    import aiokafka.record.memory_records as aio_memory
    import kafka.record.default_records as kp_default
    import kafka.record.memory_records as kp_memory

from kafkette.protocol.records import (
    LZ4,
    NO_COMPRESSION,
    RecordBatchBuilder,
    iter_batches,
    speedups,
)

BATCH = 1000
BASE_TS = 1_700_000_000_000
CODECS = {"none": NO_COMPRESSION, "lz4": LZ4}


def values() -> list[bytes]:
    """1,000 distinct 100-byte values, about half compressible (like JSON-ish payloads)."""
    out = []
    for i in range(BATCH):
        head = (b"%08d" % (i * 7919 % 100_000_000)) * 6
        out.append((head + bytes((i * 31 + j) % 256 for j in range(52)))[:100])
    return out


def varying_values() -> list[bytes]:
    """1,000 values of 50 to 150 bytes (records of different sizes)."""
    base = values()
    return [(base[i] * 2)[: 50 + (i * 37) % 101] for i in range(BATCH)]


def keys(with_keys: bool) -> list[bytes | None]:
    return [b"%016d" % i for i in range(BATCH)] if with_keys else [None] * BATCH


def encode_kafkette(n_batches: int, codec: int, ks: list[bytes | None], vs: list[bytes]) -> Any:
    out = []
    for b in range(n_batches):
        builder = RecordBatchBuilder(compression=codec, base_offset=b * BATCH)
        append = builder.append
        for i in range(BATCH):
            append(BASE_TS + i // 10, ks[i], vs[i])
        out.append(builder.build())
    return out


def encode_peer(builder_cls: Any) -> Callable[..., Any]:
    def encode(n_batches: int, codec: int, ks: list[bytes | None], vs: list[bytes]) -> Any:
        out = []
        for _ in range(n_batches):
            builder = builder_cls(
                magic=2,
                compression_type=codec,
                is_transactional=0,
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
                batch_size=1 << 30,
            )
            append = builder.append
            for i in range(BATCH):
                append(i, timestamp=BASE_TS + i // 10, key=ks[i], value=vs[i], headers=[])
            out.append(bytes(builder.build()))
        return out

    return encode


def decode_kafkette(buf: bytes) -> int:
    n = 0
    for batch in iter_batches(buf):
        for r in batch:
            _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def decode_peer(memory_cls: Any) -> Callable[[bytes], int]:
    def decode(buf: bytes) -> int:
        n = 0
        records = memory_cls(buf)
        while (batch := records.next_batch()) is not None:
            if not batch.validate_crc():
                raise AssertionError("bad CRC")
            for r in batch:
                _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
                n += 1
        return n

    return decode


def aiokafka_impl() -> str:
    module = aio_default.DefaultRecordBatchBuilder.__module__
    return "C extension (aiokafka.record._crecords)" if "_crecords" in module else "pure Python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-extra", action="store_true", help="skip the extra case of 50-150-byte values"
    )
    args = parser.parse_args()
    n_batches = max(args.records // BATCH, 1)
    n_records = n_batches * BATCH
    vs = values()

    encoders: dict[str, Callable[..., Any]] = {
        "kafkette": encode_kafkette,
        "kafka-python": encode_peer(kp_default.DefaultRecordBatchBuilder),
        "aiokafka": encode_peer(aio_default.DefaultRecordBatchBuilder),
    }
    decoders: dict[str, Callable[[bytes], int]] = {
        "kafkette": decode_kafkette,
        "kafka-python": decode_peer(kp_memory.MemoryRecords),
        "aiokafka": decode_peer(aio_memory.MemoryRecords),
    }
    print(f"aiokafka record code: {aiokafka_impl()}")
    kafkette_impl = (
        "C extension (kafkette.protocol.records._speedups)"
        if speedups.EXTENSION_USED
        else "pure Python"
    )
    print(f"kafkette record parser: {kafkette_impl}")
    print(f"{n_records:,} records, batches of {BATCH}, 100-byte values, best of {args.rounds}")
    print()

    cases = [
        (f"{codec_name}, {'16-byte keys' if with_keys else 'no keys'}", codec, keys(with_keys), vs)
        for with_keys in (False, True)
        for codec_name, codec in CODECS.items()
    ]
    if not args.no_extra:
        cases.append(("none, no keys, 50-150B*", NO_COMPRESSION, keys(False), varying_values()))
    rows = []
    for case, codec, ks, vs in cases:
        # The decode input: aiokafka-built batches with consecutive base offsets.
        batches = encoders["aiokafka"](n_batches, codec, ks, vs)
        starts = range(0, n_records, BATCH)
        buf = b"".join(i.to_bytes(8, "big") + b[8:] for i, b in zip(starts, batches, strict=True))
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.rounds):
            for name in encoders:
                gc.collect()
                start = time.process_time()
                encoders[name](n_batches, codec, ks, vs)
                elapsed = time.process_time() - start
                key = ("encode", name)
                best[key] = min(best.get(key, elapsed), elapsed)
            for name in decoders:
                gc.collect()
                start = time.process_time()
                count = decoders[name](buf)
                elapsed = time.process_time() - start
                if count != n_records:
                    raise AssertionError(f"{name} decoded {count} records")
                key = ("decode", name)
                best[key] = min(best.get(key, elapsed), elapsed)
        for op in ("encode", "decode"):
            rate = {name: n_records / best[(op, name)] for name in encoders}
            rows.append((op, case, rate))
            print(
                f"{op:6} {case:23} kafkette {rate['kafkette']:>11,.0f}/s  "
                f"kafka-python {rate['kafka-python']:>11,.0f}/s  "
                f"aiokafka {rate['aiokafka']:>11,.0f}/s",
                flush=True,
            )

    print()
    header = (
        f"| {'op':6} | {'case':23} | {'kafkette rec/s':>14} | {'kafka-python rec/s':>18} "
        f"| {'aiokafka rec/s':>14} | {'vs kafka-python':>15} | {'vs aiokafka':>11} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|")
    for op, case, rate in rows:
        print(
            f"| {op:6} | {case:23} | {rate['kafkette']:>14,.0f} | {rate['kafka-python']:>18,.0f} "
            f"| {rate['aiokafka']:>14,.0f} | {rate['kafkette'] / rate['kafka-python']:>14.2f}x "
            f"| {rate['kafkette'] / rate['aiokafka']:>10.2f}x |"
        )
    if not args.no_extra:
        print()
        print(
            "* extra case, not in the targets: values of 50 to 150 bytes, so records differ "
            "in size (kafkette reads them with a per-record loop for the sizes, columns for "
            "the rest)."
        )


if __name__ == "__main__":
    main()
