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
