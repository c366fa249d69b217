"""Protobuf compatibility (compatibility/protobuf.py): field by number, what the wire format
tolerates, as Confluent's registry allows (protobuf-provider SchemaDiff). Each row is
(reader .proto, writer .proto, compatible)."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from kafkette.schema_registry import compatibility
from kafkette.schema_registry.compatibility import protobuf


def proto(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


BASE = proto("message Order { int64 id = 1; string note = 2; }")

TABLE: list[tuple[str, str, bool]] = [
    (BASE, BASE, True),
    # fields added, removed, renamed
    (proto("message Order { int64 id = 1; string note = 2; double total = 3; }"), BASE, True),
    (proto("message Order { int64 id = 1; }"), BASE, True),
    (proto("message Order { int64 key = 1; string note = 2; }"), BASE, True),
    # scalar classes
    (proto("message Order { int32 id = 1; string note = 2; }"), BASE, True),
    (proto("message Order { uint64 id = 1; string note = 2; }"), BASE, True),
    (proto("message Order { bool id = 1; string note = 2; }"), BASE, True),
    (proto("message Order { sint64 id = 1; string note = 2; }"), BASE, False),
    (proto("message Order { fixed64 id = 1; string note = 2; }"), BASE, False),
    (proto("message Order { double id = 1; string note = 2; }"), BASE, False),
    (proto("message Order { int64 id = 1; bytes note = 2; }"), BASE, True),
    (proto("message Order { int64 id = 1; int64 note = 2; }"), BASE, False),
    (proto("message Order { repeated int64 id = 1; string note = 2; }"), BASE, False),
    (proto("message Order { int64 id = 1; repeated string note = 2; }"), BASE, True),
    # enums read as numbers
    (proto("enum S { A = 0; } message Order { S id = 1; string note = 2; }"), BASE, True),
    # messages
    (proto("message Order { int64 id = 1; }\nmessage Other { int32 x = 1; }"), BASE, True),
    (proto("message Other { int64 id = 1; }"), BASE, False),
    (proto("message Order { int64 id = 1; string note = 2; }", package="store"), BASE, False),
    (
        proto("message Line { int32 qty = 1; string sku = 2; } message Order { Line line = 1; }"),
        proto("message Line { int32 qty = 1; } message Order { Line line = 1; }"),
        True,
    ),
    (
        proto("message Line { string qty = 1; } message Order { Line line = 1; }"),
        proto("message Line { int32 qty = 1; } message Order { Line line = 1; }"),
        False,
    ),
    (
        proto("message Item { int32 qty = 1; } message Order { Item line = 1; }"),
        proto("message Line { int32 qty = 1; } message Order { Line line = 1; }"),
        False,
    ),
    (proto("message Order { string id = 1; string note = 2; }"), BASE, False),
    # maps
    (
        proto("message Order { map<string, int64> tags = 1; }"),
        proto("message Order { map<string, int32> tags = 1; }"),
        True,
    ),
    (
        proto("message Order { map<string, string> tags = 1; }"),
        proto("message Order { map<string, int32> tags = 1; }"),
        False,
    ),
    # oneofs
    (
        proto("message Order { oneof pay { string card = 1; string iban = 2; } }"),
        proto("message Order { oneof pay { string card = 1; } }"),
        True,
    ),
    (
        proto("message Order { oneof pay { string card = 1; } }"),
        proto("message Order { oneof pay { string card = 1; string iban = 2; } }"),
        False,
    ),
    (
        proto("message Order { string card = 1; string iban = 2; }"),
        proto("message Order { oneof pay { string card = 1; string iban = 2; } }"),
        True,
    ),
    (
        proto("message Order { oneof pay { string card = 1; string iban = 2; } }"),
        proto("message Order { string card = 1; string iban = 2; }"),
        False,
    ),
    # proto2 required
    (
        'syntax = "proto2"; package shop; message Order { required int64 id = 1;'
        " required int32 n = 2; }",
        'syntax = "proto2"; package shop; message Order { required int64 id = 1; }',
        False,
    ),
    (
        'syntax = "proto2"; package shop; message Order { optional int64 x = 2; }',
        'syntax = "proto2"; package shop; message Order { required int64 id = 1; }',
        False,
    ),
]


def parse(text: str) -> protobuf.ProtoFile:
    return protobuf.parse(text)


@pytest.mark.parametrize(("reader", "writer", "expected"), TABLE)
def test_protobuf_table(reader: str, writer: str, expected: bool) -> None:
    """Each change is allowed or refused as the wire format (and Confluent) says."""
    assert (not protobuf.read_incompatibilities(parse(reader), parse(writer))) is expected


def test_the_reader_skips_options_imports_services_and_comments() -> None:
    """A realistic file reads: imports, options, reserved, nested types, a service."""
    text = """
    // an order
    syntax = "proto3";
    package shop.v1;
    import "google/protobuf/timestamp.proto";
    option java_package = "com.shop";
    /* block
       comment */
    message Order {
      option deprecated = true;
      reserved 4, 6 to 8;
      reserved "old";
      message Line { string sku = 1 [json_name = "SKU"]; int32 qty = 2; }
      enum State { NEW = 0; PAID = 1 [deprecated = true]; }
      int64 id = 1;
      repeated Line lines = 2;
      State state = 3;
      google.protobuf.Timestamp at = 5;
      optional string note = 9;
    }
    service Orders { rpc Get(Order) returns (Order); }
    """
    parsed = parse(text)
    assert parsed.package == "shop.v1"
    assert sorted(parsed.messages) == ["shop.v1.Order", "shop.v1.Order.Line"]
    assert parsed.enums == frozenset({"shop.v1.Order.State"})
    order = parsed.messages["shop.v1.Order"]
    assert [(f.number, f.name, f.type, f.label) for f in order.fields.values()] == [
        (1, "id", "int64", ""),
        (2, "lines", "Line", "repeated"),
        (3, "state", "State", ""),
        (5, "at", "google.protobuf.Timestamp", ""),
        (9, "note", "string", "optional"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "message {",
        proto("message Order { int64 id = 0; }"),
        proto("message Order { int64 id = 1; int64 id2 = 1; }"),
        proto("message Order { int64 id = x; }"),
        proto("message Order { int64 id = 1 }"),
        proto("message Order { int64 id = 1;"),
        "@@@",
    ],
)
def test_invalid_proto_text_is_refused(text: str) -> None:
    """Text the reader cannot read is InvalidSchema (the registry's 422), never a crash."""
    with pytest.raises(compatibility.InvalidSchema):
        compatibility.parse("PROTOBUF", text)


def test_a_base64_file_descriptor_reads_as_its_text() -> None:
    """A FileDescriptorProto built with the protobuf library (as clients send schemas),
    base64-encoded, gives the same model as the equivalent .proto text."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=3, label=1)  # int64
    order.field.add(name="lines", number=2, type=11, label=3, type_name=".shop.Line")
    order.oneof_decl.add(name="pay")
    order.field.add(name="card", number=3, type=9, label=1, oneof_index=0)
    entry = order.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=9, label=1)
    entry.field.add(name="value", number=2, type=5, label=1)
    order.field.add(name="tags", number=4, type=11, label=3, type_name=".shop.Order.TagsEntry")
    line = file.message_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1)
    encoded = base64.b64encode(file.SerializeToString()).decode()
    from_descriptor = compatibility.parse("PROTOBUF", encoded).model
    from_text = compatibility.parse(
        "PROTOBUF",
        proto(
            "message Order { int64 id = 1; repeated Line lines = 2; oneof pay { string card = 3; }"
            " map<string, int32> tags = 4; } message Line { string sku = 1; }"
        ),
    ).model
    assert isinstance(from_descriptor, protobuf.ProtoFile)
    assert isinstance(from_text, protobuf.ProtoFile)
    assert sorted(from_descriptor.messages) == sorted(from_text.messages)
    described = from_descriptor.messages["shop.Order"].fields
    written = from_text.messages["shop.Order"].fields
    assert [(f.number, f.name, f.oneof, f.key_type) for f in described.values()] == [
        (f.number, f.name, f.oneof, f.key_type) for f in written.values()
    ]
    assert protobuf.read_incompatibilities(from_descriptor, from_text) == []
    assert protobuf.read_incompatibilities(from_text, from_descriptor) == []
