"""The schema registry client: Confluent's REST API v1, sync and async, with caches."""

from kafkette.schema_registry.client.types import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryError,
)

__all__ = ["RegisteredSchema", "Schema", "SchemaReference", "SchemaRegistryError"]
