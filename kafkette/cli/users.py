"""``kafkette users``: SCRAM users of a running broker (AlterUserScramCredentials and
DescribeUserScramCredentials), as ``kafka-configs.sh --entity-type users`` manages them.

``users add NAME`` sets NAME's password for SCRAM-SHA-256 and SCRAM-SHA-512 (or
each ``--mechanism``); the password is read from ``--password-file``, else the
first line of standard input, else asked for at the terminal, so it never shows
in the process list. ``users remove NAME`` deletes the user's credentials (every
mechanism it has unless ``--mechanism``). ``users list [NAME...]`` prints each
user's mechanisms and iteration counts.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from kafkette.admin.scram import (
    DEFAULT_ITERATIONS,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkette.admin.sync_client import AdminClient
from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    print_json,
    print_rows,
)

ALL_MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("users", help="add, remove and list SCRAM users")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    add = actions.add_parser("add", help="set a user's SCRAM password")
    add.add_argument("name", metavar="NAME")
    _mechanism_option(add, "all")
    add.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help=f"SCRAM iterations, 4096 to 16384 (default {DEFAULT_ITERATIONS})",
    )
    add.add_argument(
        "--password-file",
        metavar="FILE",
        help="read the password from the first line of FILE (default: standard input, "
        "or a prompt at a terminal)",
    )
    add_common_arguments(add)
    add.set_defaults(run=add_user)

    remove = actions.add_parser("remove", help="delete a user's SCRAM credentials")
    remove.add_argument("name", metavar="NAME")
    _mechanism_option(remove, "every one the user has")
    add_common_arguments(remove)
    remove.set_defaults(run=remove_user)

    listing = actions.add_parser("list", help="users and their SCRAM mechanisms")
    listing.add_argument("names", nargs="*", metavar="NAME", help="only these users")
    add_common_arguments(listing)
    listing.set_defaults(run=list_users)


def _mechanism_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--mechanism",
        action="append",
        default=[],
        metavar="MECHANISM",
        help=f"SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: {default})",
    )


def _mechanisms(args: argparse.Namespace) -> list[ScramMechanism]:
    try:
        return [ScramMechanism.parse(text) for text in args.mechanism]
    except ValueError as exc:
        raise UsageError(f"--mechanism: {exc}") from None


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise UsageError(f"--password-file: {exc}") from None
    elif sys.stdin is not None and sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.name}: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n") if sys.stdin is not None else ""
    if not password:
        raise UsageError("the password is empty")
    return password


def add_user(args: argparse.Namespace) -> int:
    mechanisms = _mechanisms(args) or list(ALL_MECHANISMS)
    password = _password(args)
    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(args.name, m, password, args.iterations) for m in mechanisms
    ]
    with AdminClient(client_settings(args, "admin")) as admin:
        admin.alter_user_scram_credentials(alterations).all()
    _done(args, "added", mechanisms)
    return 0


def remove_user(args: argparse.Namespace) -> int:
    mechanisms = _mechanisms(args)
    with AdminClient(client_settings(args, "admin")) as admin:
        if not mechanisms:
            described = admin.describe_user_scram_credentials([args.name])[args.name].result()
            mechanisms = [info.mechanism for info in described.credential_infos]
        deletions: list[UserScramCredentialAlteration] = [
            UserScramCredentialDeletion(args.name, m) for m in mechanisms
        ]
        admin.alter_user_scram_credentials(deletions).all()
    _done(args, "removed", mechanisms)
    return 0


def _done(args: argparse.Namespace, what: str, mechanisms: list[ScramMechanism]) -> None:
    names = [m.mechanism_name for m in mechanisms]
    if args.json:
        print_json({"user": args.name, what: names})
    else:
        print(f"{what} {args.name}: {', '.join(names)}")


def list_users(args: argparse.Namespace) -> int:
    with AdminClient(client_settings(args, "admin")) as admin:
        described = admin.describe_user_scram_credentials(args.names or None).all()
    rows = [
        (user, info.mechanism.mechanism_name, info.iterations)
        for user, description in described.items()
        for info in description.credential_infos
    ]
    print_rows(args, ("user", "mechanism", "iterations"), rows)
    return 0
