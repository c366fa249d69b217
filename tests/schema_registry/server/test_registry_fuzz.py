"""Bad input never breaks the registry core: any method, path, query and body gets an
answer, JSON with Confluent's error shape when it is not a success, and the state
stays consistent (hypothesis over request sequences)."""

from __future__ import annotations

import json

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.schema_registry.server import SchemaRegistry

SEGMENTS = st.sampled_from(
    [
        "subjects", "versions", "latest", "-1", "0", "1", "2", "99999999999", "schemas", "ids",
        "types", "config", "mode", "compatibility", "referencedby", "schema", "s", "t", "%2F",
        "%zz", "", "..",
    ]
)  # fmt: skip
SCHEMAS = st.sampled_from(
    [
        '"string"',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}',
        '{"type": "record", "name": "R", "fields": []}',
        "{",
        '{"type": "object"}',
    ]
)
BODIES = st.one_of(
    st.binary(max_size=40),
    st.builds(
        lambda schema, kind, extra: json.dumps(
            {"schema": schema, "schemaType": kind, **extra}
        ).encode(),
        SCHEMAS,
        st.sampled_from(["AVRO", "JSON", "PROTOBUF", "XML", None]),
        st.dictionaries(
            st.sampled_from(["id", "version", "references", "compatibility", "mode"]),
            st.one_of(st.integers(-3, 3), st.text(max_size=5), st.lists(st.integers(), max_size=2)),
            max_size=2,
        ),
    ),
    st.sampled_from(
        [b'{"compatibility": "FULL"}', b'{"compatibility": 3}', b'{"mode": "READONLY"}', b"null"]
    ),
)
RANDOM_REQUESTS = st.tuples(
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "get"]),
    st.one_of(
        st.lists(SEGMENTS, max_size=5).map(lambda parts: "/" + "/".join(parts)),
        st.sampled_from(
            [
                "/subjects/s/versions",
                "/subjects/t/versions",
                "/subjects/s/versions/latest",
                "/subjects/s/versions/1",
                "/subjects/s",
                "/schemas/ids/1",
                "/schemas/ids/2/versions",
                "/config/s",
                "/config",
                "/mode",
                "/mode/s",
                "/compatibility/subjects/s/versions/latest",
            ]
        ),
    ),
    st.dictionaries(
        st.sampled_from(["permanent", "deleted", "verbose", "defaultToGlobal", "subject", "force"]),
        st.sampled_from(["true", "false", "", "x"]),
        max_size=2,
    ),
    BODIES,
)


REGISTRATIONS = st.tuples(
    st.just("POST"),
    st.sampled_from(["/subjects/s/versions", "/subjects/t/versions"]),
    st.just({}),
    SCHEMAS.map(lambda schema: json.dumps({"schema": schema}).encode()),
)
REQUESTS = st.one_of(RANDOM_REQUESTS, REGISTRATIONS)


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUESTS, min_size=1, max_size=12))
def test_any_request_sequence_gets_answers(
    requests: list[tuple[str, str, dict[str, str], bytes]],
) -> None:
    """Each request is answered (never raises), with JSON; errors carry error_code and
    message; ids of live versions stay unique per schema."""

    async def run() -> None:
        registry = SchemaRegistry()
        for method, path, query, body in requests:
            status, answer, content_type = await registry.handle(method, path, query, body, {})
            assert content_type == "application/vnd.schemaregistry.v1+json"
            assert status != 500, answer
            if status >= 400:
                error = json.loads(answer)
                assert isinstance(error["error_code"], int) and isinstance(error["message"], str)
            elif not path.endswith("/schema"):
                json.loads(answer)
        seen: dict[int, tuple[str, str]] = {}
        for version in registry.state.all_versions():
            identity = (version.schema_type, version.schema)
            assert seen.setdefault(version.id, identity) == identity

    anyio.run(run)
