"""``odradek delegation-tokens``: create, renew, expire and describe delegation tokens (Kafka's
kafka-delegation-tokens.sh).

    odradek delegation-tokens --bootstrap-server B --command-config F --create --max-life-time-period -1
                              [--renewer-principal User:bob ...] [--owner-principal User:alice]
    odradek delegation-tokens --bootstrap-server B --command-config F --renew --hmac H --renew-time-period MS
    odradek delegation-tokens --bootstrap-server B --command-config F --expire --hmac H --expiry-time-period MS
    odradek delegation-tokens --bootstrap-server B --command-config F --describe [--owner-principal User:alice ...]

Exactly one action; ``--bootstrap-server`` and ``--command-config`` (the client's security keys:
token requests are served on authenticated channels only) are required, as in Kafka's tool, and
so are ``--max-life-time-period`` for ``--create`` (-1: the broker's
``delegation.token.max.lifetime.ms``), ``--hmac`` with ``--renew-time-period`` (-1: the broker's
``delegation.token.expiry.time.ms``) for ``--renew`` and with ``--expiry-time-period`` (-1: at once)
for ``--expire``. ``--describe`` without ``--owner-principal`` lists the caller's tokens and those
it may describe.

Output is Kafka's: a ``Calling ... operation`` line, then for create and describe the token table
``TOKENID HMAC OWNER REQUESTER RENEWERS ISSUEDATE EXPIRYDATE MAXDATE`` (columns padded to 15, 30,
15, 15, 25, 15, 15, 15 characters, each row after a blank line, renewers as ``[User:bob]``, dates as
``yyyy-MM-dd'T'HH:mm`` in local time); renew and expire print ``Completed renew operation. New
expiry date : <date>``. Exit status 0, 1 for a refusal (the error and Kafka's message on stderr), 2
for a usage error.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Sequence

from odradek.cli.common import ArgumentParser, CommandError, client_security, parse_args, run
from odradek.client.admin import AdminClient
from odradek.client.delegation_tokens import (
    DelegationToken,
    create_token,
    describe_tokens,
    expire_token,
    renew_token,
)
from odradek.security.delegation_token import hmac_base64
from odradek.security.principal import KafkaPrincipal

PROG = "odradek delegation-tokens"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", help="REQUIRED: server(s) to use for bootstrapping.")
    parser.add_argument(
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help="REQUIRED: a properties file of client security keys (token requests need an authenticated channel).",
    )
    parser.add_argument("--create", action="store_true", help="Create a new delegation token.")
    parser.add_argument("--renew", action="store_true", help="Renew delegation token.")
    parser.add_argument("--expire", action="store_true", help="Expire delegation token.")
    parser.add_argument("--describe", action="store_true", help="Describe delegation tokens.")
    parser.add_argument("--owner-principal", action="append", default=[], help="principalType:name")
    parser.add_argument("--renewer-principal", action="append", default=[], help="principalType:name")
    parser.add_argument("--max-life-time-period", type=int, help="Max life period for the token in milliseconds.")
    parser.add_argument("--renew-time-period", type=int, help="Renew time period in milliseconds.")
    parser.add_argument("--expiry-time-period", type=int, help="Expiry time period in milliseconds.")
    parser.add_argument("--hmac", help="HMAC of the delegation token")
    return parser


def _check_args(args: object) -> str | None:
    """Kafka's ``checkArgs``: the usage error, or None."""
    get = args.__getattribute__
    actions = [name for name in ("create", "renew", "expire", "describe") if get(name)]
    if len(actions) != 1:
        return "Command must include exactly one action: --create, --renew, --expire or --describe"
    for option in ("bootstrap_server", "command_config"):
        if get(option) is None:
            return f'Missing required argument "[{option.replace("_", "-")}]"'
    required = {
        "create": ("max_life_time_period",),
        "renew": ("hmac", "renew_time_period"),
        "expire": ("hmac", "expiry_time_period"),
        "describe": (),
    }
    invalid = {
        "create": ("hmac", "renew_time_period", "expiry_time_period"),
        "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"),
        "expire": ("max_life_time_period", "renew_time_period", "owner_principal"),
        "describe": ("renew_time_period", "max_life_time_period", "hmac", "expiry_time_period"),
    }
    action = actions[0]
    for option in required[action]:
        if get(option) is None:
            return f'Missing required argument "[{option.replace("_", "-")}]"'
    for option in invalid[action]:
        if get(option) not in (None, []):
            return f'Option "[{action}]" can\'t be used with option "[{option.replace("_", "-")}]"'
    return None


def _principals(values: Sequence[str]) -> list[KafkaPrincipal]:
    try:
        return [KafkaPrincipal.parse(v.strip()) for v in values]
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _date(ms: int) -> str:
    """Java's ``SimpleDateFormat("yyyy-MM-dd'T'HH:mm")`` in local time."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def _principal_list(principals: Sequence[KafkaPrincipal]) -> str:
    """A Java ``List.toString()``: ``[User:a, User:b]``."""
    return "[" + ", ".join(str(p) for p in principals) + "]"


def _row(values: Sequence[str]) -> str:
    widths = (15, 30, 15, 15, 25, 15, 15, 15)
    return " ".join(f"{v:<{w}}" for v, w in zip(values, widths, strict=True))


def token_table(tokens: Sequence[DelegationToken]) -> list[str]:
    """``printToken``'s lines: a blank line before the header and before each row."""
    lines = ["", _row(["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"])]
    for token in tokens:
        info = token.info
        lines += [
            "",
            _row(
                [
                    info.token_id,
                    hmac_base64(token.hmac),
                    str(info.owner),
                    str(info.token_requester),
                    _principal_list(info.renewers),
                    _date(info.issue_timestamp),
                    _date(info.expiry_timestamp),
                    _date(info.max_timestamp),
                ]
            ),
        ]
    return lines


def _decode_hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CommandError(f"Illegal base64 HMAC: {text}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    problem = _check_args(args)
    if problem is not None:
        parser.print_usage()
        print(f"{PROG}: error: {problem}")
        return 2

    async def go() -> int:
        async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
            conn = await admin.cluster.any_connection()
            if args.create:
                renewers = _principals(args.renewer_principal)
                owners = _principals(args.owner_principal)
                print(
                    f"Calling create token operation with renewers :{_principal_list(renewers)} , "
                    f"max-life-time-period :{args.max_life_time_period}"
                )
                token = await create_token(
                    conn,
                    renewers=renewers,
                    max_lifetime_ms=args.max_life_time_period,
                    owner=owners[0] if owners else None,
                )
                print(f"Created delegation token with tokenId : {token.info.token_id}")
                print("\n".join(token_table([token])))
            elif args.renew:
                print(
                    f"Calling renew token operation with hmac :{args.hmac} , "
                    f"renew-time-period :{args.renew_time_period}"
                )
                expiry = await renew_token(conn, _decode_hmac(args.hmac), args.renew_time_period)
                print(f"Completed renew operation. New expiry date : {_date(expiry)}")
            elif args.expire:
                print(
                    f"Calling expire token operation with hmac :{args.hmac} , "
                    f"expire-time-period :{args.expiry_time_period}"
                )
                expiry = await expire_token(conn, _decode_hmac(args.hmac), args.expiry_time_period)
                print(f"Completed expire operation. New expiry date : {_date(expiry)}")
            else:
                owners = _principals(args.owner_principal)
                if owners:
                    print(f"Calling describe token operation for owners: {_principal_list(owners)}")
                else:
                    print("Calling describe token operation for current user.")
                tokens = await describe_tokens(conn, owners or None)
                print(f"Total number of tokens : {len(tokens)}")
                print("\n".join(token_table(tokens)))
        return 0

    return run(PROG, go)
