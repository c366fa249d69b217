from collections.abc import Callable
from typing import Any

def decode_produce_request(frame: Any, /) -> tuple[Any, Any] | None: ...
def encode_produce_response(
    version: int, fallback: Callable[[Any, Any], None], out: Any, response: Any, /
) -> None: ...
def bind(
    request_header: type,
    produce_request: type,
    topic_data: type,
    partition_data: type,
    leader_id_and_epoch: type,
    /,
) -> None: ...
def encode_produce_request(
    version: int, fallback: Callable[[Any, Any], None], out: Any, request: Any, /
) -> None: ...
def encode_produce_request_parts(
    version: int, correlation_id: int, client_id: bytes, request: Any, /
) -> list[Any] | None: ...
def decode_produce_response(
    version: int, fallback: Callable[[Any, int], Any], buf: Any, pos: int, /
) -> Any: ...
def bind_client(
    produce_response: type, topic_produce_response: type, partition_produce_response: type, /
) -> None: ...
