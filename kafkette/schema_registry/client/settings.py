"""The registry client's settings: Confluent's names (``basic.auth.user.info``) or Python's.

A client takes a URL (``http://host:8081``, ``https://...``, several comma-separated
for fail-over, ``memory://NAME`` for a ``memory://`` cluster's registry in this
process) or confluent-kafka's configuration dict (``{"url": ...,
"basic.auth.user.info": "user:secret"}``), and options in either spelling
(``ssl_ca_location=``). An unknown or invalid setting is a
:class:`~kafkette.errors.ConfigError` naming it, at construction.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs

from kafkette.errors import ConfigError

SCHEMES = ("http", "https", "memory")


@attrs.frozen
class Endpoint:
    """One registry URL: where to connect, the path prefix, credentials in the URL."""

    scheme: str
    host: str
    port: int
    prefix: str = ""
    userinfo: tuple[str, str] | None = None

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def authority(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.prefix}"


def parse_url(url: str) -> Endpoint:
    """One URL as an :class:`Endpoint`; ConfigError naming ``url`` if it is not one."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError("url", f"{url!r}: the scheme must be one of {', '.join(SCHEMES)}")
    if scheme == "memory":
        name = (parts.netloc + parts.path).strip("/")
        if not name:
            raise ConfigError("url", f"{url!r}: memory:// needs the cluster's name")
        return Endpoint("memory", name, 0)
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise ConfigError("url", f"{url!r}: {exc}") from None
    if not parts.hostname:
        raise ConfigError("url", f"{url!r}: no host")
    userinfo = None
    if parts.username is not None:
        userinfo = (unquote(parts.username), unquote(parts.password or ""))
    return Endpoint(scheme, parts.hostname, port, parts.path.rstrip("/"), userinfo)


def _number(name: str, value: Any, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ConfigError(name, f"must be a number >= {minimum}, got {value!r}")
    return float(value)


@attrs.frozen
class RegistrySettings:
    """Everything a transport needs, checked."""

    endpoints: tuple[Endpoint, ...]
    basic_auth: tuple[str, str] | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None
    ssl_verify: bool = True
    timeout: float = 30.0
    max_retries: int = 3
    retries_wait_ms: int = 1000
    retries_max_wait_ms: int = 20000

    @property
    def memory(self) -> bool:
        return self.endpoints[0].scheme == "memory"

    def credentials(self, endpoint: Endpoint) -> tuple[str, str] | None:
        return self.basic_auth or endpoint.userinfo

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of https endpoints (system CAs unless ``ssl.ca.location``)."""
        try:
            context = ssl.create_default_context(cafile=self.ssl_ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.ca.location", f"{self.ssl_ca_location!r}: {exc}") from None
        if not self.ssl_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.ssl_certificate_location:
            try:
                context.load_cert_chain(
                    self.ssl_certificate_location,
                    self.ssl_key_location,
                    self.ssl_key_password,
                )
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    "ssl.certificate.location", f"{self.ssl_certificate_location!r}: {exc}"
                ) from None
        return context


_NAMES = {
    "url",
    "basic.auth.user.info",
    "basic.auth.credentials.source",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.verify",
    "timeout",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
    "cache.capacity",
    "cache.latest.ttl.sec",
}
"""confluent-kafka's settings this client takes (the cache ones are accepted and unused:
this client's caches hold what never changes, and no latest versions)."""


def _dotted(name: str) -> str:
    dotted = name.replace("_", ".")
    if dotted not in _NAMES:
        raise ConfigError(
            name, f"unknown schema registry setting (known: {', '.join(sorted(_NAMES))})"
        )
    return dotted


def registry_settings(
    url_or_conf: str | Mapping[str, Any] | None = None, **options: Any
) -> RegistrySettings:
    """The settings of a client made with a URL or a conf dict, plus options."""
    values: dict[str, Any] = {}
    if isinstance(url_or_conf, str):
        values["url"] = url_or_conf
    elif url_or_conf is not None:
        for name, value in url_or_conf.items():
            values[_dotted(name)] = value
    for name, value in options.items():
        values[_dotted(name)] = value
    url = values.pop("url", None)
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("url", f"the registry's URL is required, got {url!r}")
    endpoints = tuple(parse_url(part) for part in url.split(",") if part.strip())
    if len({e.scheme == "memory" for e in endpoints}) > 1 or (
        endpoints[0].scheme == "memory" and len(endpoints) > 1
    ):
        raise ConfigError("url", f"{url!r}: memory:// cannot be mixed with other URLs")

    source = str(values.pop("basic.auth.credentials.source", "USER_INFO")).upper()
    user_info = values.pop("basic.auth.user.info", None)
    basic_auth: tuple[str, str] | None = None
    if source not in ("USER_INFO", "URL"):
        raise ConfigError("basic.auth.credentials.source", f"USER_INFO or URL, got {source!r}")
    if user_info is not None:
        if source == "URL":
            raise ConfigError("basic.auth.user.info", "set, but the credentials source is URL")
        if isinstance(user_info, tuple | list) and len(user_info) == 2:
            basic_auth = (str(user_info[0]), str(user_info[1]))
        elif isinstance(user_info, str) and ":" in user_info:
            user, _, password = user_info.partition(":")
            basic_auth = (user, password)
        else:
            raise ConfigError("basic.auth.user.info", "must be 'USER:PASSWORD'")

    for name in ("cache.capacity", "cache.latest.ttl.sec"):
        values.pop(name, None)
    strings = {}
    for name in (
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
    ):
        value = values.pop(name, None)
        if value is not None and not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
        strings[name.replace(".", "_")] = value
    if strings["ssl_key_location"] and not strings["ssl_certificate_location"]:
        raise ConfigError("ssl.key.location", "set without ssl.certificate.location")
    verify = values.pop("ssl.verify", True)
    if not isinstance(verify, bool):
        raise ConfigError("ssl.verify", f"must be True or False, got {verify!r}")
    timeout = _number("timeout", values.pop("timeout", 30.0), 0.001)
    retries = int(_number("max.retries", values.pop("max.retries", 3), 0))
    wait = int(_number("retries.wait.ms", values.pop("retries.wait.ms", 1000), 0))
    max_wait = int(_number("retries.max.wait.ms", values.pop("retries.max.wait.ms", 20000), 0))
    assert not values, values
    return RegistrySettings(
        endpoints,
        basic_auth,
        ssl_verify=verify,
        timeout=timeout,
        max_retries=retries,
        retries_wait_ms=wait,
        retries_max_wait_ms=max_wait,
        **strings,
    )
