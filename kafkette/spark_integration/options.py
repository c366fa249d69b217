"""The data source's options: Spark's Kafka connector names, meanings and error messages.

Spark hands a Python data source its options with lower-cased keys, so every
key here is lower case (``startingoffsets`` for ``startingOffsets``). Kafka
client settings are the ``kafka.``-prefixed options; :func:`kafka_client_settings`
strips the prefix and refuses the ones Spark's connector refuses, with Spark's
messages. The errors are :class:`ValueError`, Python's counterpart of the
``IllegalArgumentException`` Spark throws.
"""

from __future__ import annotations

from collections.abc import Mapping

KAFKA_PREFIX = "kafka."

_AUTO_OFFSET_RESET_MESSAGE = """
Kafka option 'auto.offset.reset' is not supported.
Instead set the source option 'startingoffsets' to 'earliest' or 'latest'
to specify where to start. Structured Streaming manages which offsets are consumed
internally, rather than relying on the kafkaConsumer to do it. This will ensure that no
data is missed when new topics/partitions are dynamically subscribed. Note that
'startingoffsets' only applies when a new Streaming query is started, and
that resuming will always pick up from where the query left off. See the docs for more
details.
"""

# Spark's messages for the client settings its connector refuses: records are
# bytes in and bytes out, and Spark (not the client) decides offsets and commits.
REFUSED_CLIENT_SETTINGS: Mapping[str, str] = {
    "auto.offset.reset": _AUTO_OFFSET_RESET_MESSAGE,
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with "
        "ByteArraySerializer."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with "
        "ByteArraySerializer."
    ),
}


def kafka_client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options as Kafka client settings, the ``kafka.`` prefix stripped.

    Options without the prefix (the data source's own) are left out. A setting
    Spark's connector refuses (``kafka.auto.offset.reset``, the key and value
    (de)serializers, ``kafka.enable.auto.commit``, ``kafka.interceptor.classes``)
    raises :class:`ValueError` with Spark's message. Values stay strings:
    kafkette's clients accept Kafka's string forms and reject unknown settings
    when they are built.
    """
    settings: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith(KAFKA_PREFIX):
            continue
        name = key[len(KAFKA_PREFIX) :].lower()
        refusal = REFUSED_CLIENT_SETTINGS.get(name)
        if refusal is not None:
            raise ValueError(refusal)
        settings[name] = value
    return settings
