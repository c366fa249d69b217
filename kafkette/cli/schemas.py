"""``kafkette schemas list|get|register|check|delete``: a schema registry's subjects.

The registry is ``--schema-registry URL`` (``http://``, ``https://``,
``memory://NAME``), else ``$KAFKETTE_SCHEMA_REGISTRY_URL``, else
``http://localhost:8081``; ``-R KEY=VALUE`` passes a client setting by
confluent-kafka's name (``basic.auth.user.info``, ``ssl.ca.location``...).

- ``list``: the subjects, their versions, the latest version's id and type;
- ``get SUBJECT [-v VERSION]`` or ``get --id ID``: the schema's text (with
  ``--json``: subject, version, id, type, schema and references);
- ``register SUBJECT FILE`` (``-`` for stdin): the schema's id; the type from
  ``--type``, else the file's extension (``.avsc`` Avro, ``.json`` JSON Schema,
  ``.proto`` Protobuf), else Avro;
- ``check SUBJECT FILE [-v VERSION]``: whether the schema may be registered
  (exit status 0) or not (1, with the registry's reasons), under the subject's
  compatibility level, against one version or every version the level checks;
- ``delete SUBJECT [-v VERSION] [--permanent]``: the versions deleted;
- ``config [SUBJECT] [--compatibility LEVEL | --delete]``: the compatibility
  level of a subject (its own, else the global one) or the global level; set
  it, or drop a subject's own.

A registry error is one line on stderr with Confluent's code, exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from kafkette.cli.common import Subcommands, UsageError, parse_setting, print_json, print_rows
from kafkette.errors import ConfigError
from kafkette.schema_registry.client import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)

REGISTRY_ENV = "KAFKETTE_SCHEMA_REGISTRY_URL"
DEFAULT_REGISTRY = "http://localhost:8081"
EXTENSIONS = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}


def add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    """``--schema-registry`` and ``-R``: where the registry is, and its client settings."""
    group = parser.add_argument_group("schema registry")
    group.add_argument(
        "--schema-registry",
        metavar="URL",
        help=f"the registry (default: ${REGISTRY_ENV}, else {DEFAULT_REGISTRY})",
    )
    group.add_argument(
        "-R",
        dest="registry_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a registry client setting by confluent-kafka's name (repeatable)",
    )


def registry_client(args: argparse.Namespace) -> SchemaRegistryClient:
    """The client the command line describes (ConfigError naming a bad setting)."""
    conf: dict[str, Any] = dict(parse_setting(text, "-R") for text in args.registry_settings)
    url = args.schema_registry or conf.pop("url", None) or os.environ.get(REGISTRY_ENV)
    conf["url"] = url or DEFAULT_REGISTRY
    for name in ("timeout",):
        if isinstance(conf.get(name), str):
            conf[name] = _number(name, conf[name])
    for name in ("max.retries", "retries.wait.ms", "retries.max.wait.ms"):
        if isinstance(conf.get(name), str):
            conf[name] = int(_number(name, conf[name]))
    return SchemaRegistryClient(conf)


def _number(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(name, f"must be a number, got {text!r}") from None


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "schemas", help="list, get, register, check and delete schemas in a schema registry"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="subjects, versions, latest ids")
    listing.add_argument("--deleted", action="store_true", help="with soft-deleted subjects")
    listing.set_defaults(run=list_subjects)

    get = actions.add_parser("get", help="a schema by subject and version, or by id")
    get.add_argument("subject", nargs="?")
    get.add_argument("-v", "--version", default="latest", help="a number or latest (default)")
    get.add_argument("--id", type=int, help="the schema with this global id")
    get.set_defaults(run=get_schema)

    register = actions.add_parser("register", help="register a schema under a subject")
    check = actions.add_parser("check", help="whether a schema may be registered")
    for action in (register, check):
        action.add_argument("subject")
        action.add_argument("file", metavar="FILE", help="the schema's file, - for stdin")
        action.add_argument("--type", choices=("AVRO", "JSON", "PROTOBUF"), type=str.upper)
        action.add_argument(
            "--reference",
            action="append",
            default=[],
            metavar="NAME=SUBJECT:VERSION",
            help="a schema this one imports (repeatable)",
        )
    register.add_argument("--normalize", action="store_true", help="normalize before storing")
    register.set_defaults(run=register_schema)
    check.add_argument("-v", "--version", help="against this version only (default: the level's)")
    check.set_defaults(run=check_schema)

    delete = actions.add_parser("delete", help="delete a subject or one version")
    delete.add_argument("subject")
    delete.add_argument("-v", "--version", help="only this version (a number or latest)")
    delete.add_argument("--permanent", action="store_true", help="after a soft delete")
    delete.set_defaults(run=delete_schemas)

    config = actions.add_parser("config", help="a subject's or the global compatibility level")
    config.add_argument("subject", nargs="?")
    change = config.add_mutually_exclusive_group()
    change.add_argument("--compatibility", type=str.upper, metavar="LEVEL", help="set it")
    change.add_argument("--delete", action="store_true", help="drop the subject's own level")
    config.set_defaults(run=configure)

    for action in (listing, get, register, check, delete, config):
        add_registry_arguments(action)
        action.add_argument("--json", action="store_true", help="print JSON instead of text")
        action.add_argument("--debug", action="store_true", help="print a traceback on errors")
        # no Kafka client here: the shared option handling finds nothing to check
        action.set_defaults(properties_files=[], settings=[], bootstrap_server=None)
        action.set_defaults(run=_reporting(action.get_default("run")))


Command = Callable[[argparse.Namespace, SchemaRegistryClient], int]


def _reporting(command: Command) -> Callable[[argparse.Namespace], int]:
    """A registry error as one line on stderr and exit status 1 (confluent's code in it)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            with registry_client(args) as client:
                return command(args, client)
        except SchemaRegistryError as exc:
            if args.debug:
                raise
            code = "" if exc.error_code == SchemaRegistryError.UNKNOWN else f" {exc.error_code}"
            print(
                f"kafkette schemas {args.action}: error{code}: {exc.error_message}",
                file=sys.stderr,
            )
            return 1

    return run


def _version(text: str) -> int | str:
    if text == "latest":
        return text
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--version {text!r}: a number or latest") from None


def list_subjects(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    rows = []
    for subject in sorted(client.get_subjects(deleted=args.deleted)):
        versions = client.get_versions(subject, deleted=args.deleted)
        latest = client.get_version(subject, max(versions), deleted=args.deleted)
        rows.append(
            (subject, versions, latest.version, latest.schema_id, latest.schema.schema_type)
        )
    print_rows(args, ("subject", "versions", "latest", "id", "type"), rows)
    return 0


def _schema_json(schema: Schema) -> dict[str, Any]:
    return {
        "schemaType": schema.schema_type,
        "schema": schema.schema_str,
        "references": [reference.to_json() for reference in schema.references],
    }


def _print_schema(schema: Schema) -> None:
    text = schema.schema_str
    if schema.schema_type in ("AVRO", "JSON"):
        with contextlib.suppress(ValueError):  # shown as stored
            text = json.dumps(json.loads(text), indent=2)
    print(text)


def get_schema(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    if (args.id is None) == (args.subject is None):
        raise UsageError("give a SUBJECT or --id ID")
    if args.id is not None:
        schema = client.get_schema(args.id)
        if args.json:
            print_json({"id": args.id, **_schema_json(schema)})
        else:
            _print_schema(schema)
        return 0
    found = client.get_version(args.subject, _version(args.version))
    if args.json:
        print_json(
            {
                "subject": found.subject,
                "version": found.version,
                "id": found.schema_id,
                **_schema_json(found.schema),
            }
        )
    else:
        _print_schema(found.schema)
    return 0


def _read_schema(args: argparse.Namespace) -> Schema:
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise UsageError(f"{args.file}: {exc.strerror or exc}") from None
    kind = args.type or EXTENSIONS.get(os.path.splitext(args.file)[1].lower(), "AVRO")
    references = []
    for given in args.reference:
        name, _, where = given.partition("=")
        subject, _, version = where.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise UsageError(f"--reference {given!r}: expected NAME=SUBJECT:VERSION")
        references.append(SchemaReference(name, subject, int(version)))
    return Schema(text, kind, references)


def register_schema(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    schema = _read_schema(args)
    registered = client.register_schema_full_response(args.subject, schema, args.normalize)
    if args.json:
        print_json(
            {"subject": args.subject, "version": registered.version, "id": registered.schema_id}
        )
    else:
        print(f"{args.subject}: version {registered.version}, id {registered.schema_id}")
    return 0


def check_schema(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    schema = _read_schema(args)
    if args.version is not None:
        compatible = client.test_compatibility(args.subject, schema, _version(args.version))
        messages: list[str] = []
    else:
        compatible, messages = client.test_compatibility_all_versions(args.subject, schema)
    if args.json:
        print_json({"subject": args.subject, "compatible": compatible, "messages": messages})
    else:
        print(f"{args.subject}: {'compatible' if compatible else 'incompatible'}")
        for message in messages:
            print(f"  {message}")
    return 0 if compatible else 1


def delete_schemas(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    if args.version is not None:
        versions = [client.delete_version(args.subject, _version(args.version), args.permanent)]
    else:
        versions = client.delete_subject(args.subject, args.permanent)
    if args.json:
        print_json({"subject": args.subject, "deleted": versions, "permanent": args.permanent})
    else:
        how = "permanently deleted" if args.permanent else "deleted"
        plural = "s" if len(versions) != 1 else ""
        print(f"{args.subject}: {how} version{plural} {', '.join(map(str, versions))}")
    return 0


def configure(args: argparse.Namespace, client: SchemaRegistryClient) -> int:
    if args.delete:
        if args.subject is None:
            raise UsageError("--delete drops a subject's own level: give the SUBJECT")
        client.delete_config(args.subject)
    elif args.compatibility is not None:
        try:
            client.set_config(args.subject, compatibility=args.compatibility)
        except ValueError as exc:
            raise UsageError(f"--compatibility: {exc}") from None
    level = client.get_config(args.subject)
    if args.json:
        print_json({"subject": args.subject, "compatibility": level})
    else:
        print(f"{args.subject or 'global'}: {level}")
    return 0


# ---- decoding records for ``kafkette consume --key-format/--value-format``

FORMATS = ("bytes", "avro", "json", "protobuf")
"""What ``--key-format``/``--value-format`` take: ``bytes`` prints the data as it is."""


class Decoded(bytes):
    """A decoded key or value: its JSON text (what text output prints) and ``.value``
    (what ``--json`` output embeds)."""

    value: Any


def _plain(value: Any) -> Any:
    """JSON for what Avro values hold besides JSON's types."""
    if isinstance(value, bytes):
        return value.decode("latin-1")  # Avro's JSON encoding of bytes and fixed
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)  # Decimal, UUID


def decoder(kind: str, client: SchemaRegistryClient) -> Callable[[bytes], Decoded]:
    """A deserializer of registry-framed ``kind`` data to :class:`Decoded`."""
    from kafkette.schema_registry.serializers import (
        AvroDeserializer,
        JSONDeserializer,
        ProtobufDictDeserializer,
    )

    read: Callable[[bytes], Any]
    if kind == "avro":
        read = AvroDeserializer(client)
    elif kind == "json":
        read = JSONDeserializer(client, validate=False)
    elif kind == "protobuf":
        read = ProtobufDictDeserializer(client)
    else:
        raise UsageError(f"unknown format {kind!r}: one of {', '.join(FORMATS)}")

    def decode(data: bytes) -> Decoded:
        value = read(data)
        decoded = Decoded(json.dumps(value, default=_plain, ensure_ascii=False).encode())
        decoded.value = value
        return decoded

    return decode


def shown(data: bytes | None) -> Any:
    """A key or value for ``--json`` output: a decoded one as its value, else None or text."""
    if isinstance(data, Decoded):
        return data.value
    return None if data is None else data.decode("utf-8", "backslashreplace")
