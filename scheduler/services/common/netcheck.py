"""Outgoing URLs (alert channels) reach only global addresses unless a setting allows a network.

A schedule's alert channel is typed by whoever may edit schedules; without this
check it could make the cluster POST to loopback services, the cloud metadata
address (169.254.169.254), the carrier-grade NAT range (100.64.0.0/10), a 6to4
relay (2002::/16) or anything else that is not on the public internet. Checked
when the URL is saved and again, after name resolution, before each delivery;
the delivery itself runs inside `outgoing_guard()` (pipelines/netguard.py), so
every hop (a redirect, a name Apprise resolves) is checked too and each host
stays pinned to the address checked (no DNS rebinding between check and send).

Settings: ETL_OUTGOING_ALLOWED_NETWORKS (CIDRs reachable although not global,
e.g. an internal receiver's 10.20.0.0/16); ETL_ALERT_ALLOW_PRIVATE_URLS=true
allows every address.
"""
from __future__ import annotations

import ipaddress
import socket
from contextlib import AbstractContextManager
from urllib.parse import urlsplit

from django.conf import settings

from scheduler.core import ConfigError
from scheduler.pipelines.netguard import EVERYWHERE, Network, address_allowed, guarded_resolution, parse_networks
from scheduler.services.common.errors import ServiceError


def allowed_networks() -> tuple[Network, ...]:
    """The networks outgoing requests may reach although they are not global, from the settings."""
    if settings.ETL_ALERT_ALLOW_PRIVATE_URLS:
        return EVERYWHERE
    try:
        return parse_networks(getattr(settings, "ETL_OUTGOING_ALLOWED_NETWORKS", []),
                              field="ETL_OUTGOING_ALLOWED_NETWORKS")
    except ConfigError as exc:
        raise ServiceError(exc.problem, field=exc.field) from None


def outgoing_guard() -> AbstractContextManager:
    """Every name resolved inside is checked and pinned (pipelines/netguard.py): wrap each delivery in it."""
    return guarded_resolution(allowed_networks())


def _refused(host: str) -> str:
    return (f"points at {host}, an address that is not global (loopback, private, link-local, shared, 6to4 ...); "
            "set ETL_OUTGOING_ALLOWED_NETWORKS (or ETL_ALERT_ALLOW_PRIVATE_URLS=true) to allow internal receivers")


def check_outgoing_url(url: str, *, field: str, resolve: bool = False) -> str:
    """The URL, or ServiceError naming `field` when it is not http(s) or reaches an address that is not global.

    With `resolve`, the host name is looked up and every address it has must be allowed (a name that
    does not resolve is refused); without it only literal addresses and `localhost` are judged, so a
    save does not depend on DNS.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ServiceError("must be an http:// or https:// URL", field=field)
    allowed = allowed_networks()
    if allowed == EVERYWHERE:
        return url
    host = parts.hostname.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        raise ServiceError(_refused(host), field=field)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if not address_allowed(host, allowed):
            raise ServiceError(_refused(host), field=field)
        return url
    if resolve:
        try:
            infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            problem = _refused(host) if isinstance(exc, socket.gaierror) and "global" in str(exc) else \
                f"host {host} does not resolve ({exc})"
            raise ServiceError(problem, field=field) from None
        if not all(address_allowed(info[4][0], allowed) for info in infos):
            raise ServiceError(_refused(host), field=field)
    return url
