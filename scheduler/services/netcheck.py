"""Outgoing URLs (alert webhooks) may not point into the scheduler's own network unless a setting allows it.

A schedule's alert webhook is typed by whoever may edit schedules; without this
check it could make the cluster POST to loopback services, the cloud metadata
address (169.254.169.254) or anything else on the private network. Checked
when the URL is saved and again, after name resolution, before each delivery.
"""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from scheduler.services.errors import ServiceError


def _forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (address.is_loopback or address.is_link_local or address.is_private or address.is_reserved
            or address.is_multicast or address.is_unspecified)


def check_outgoing_url(url: str, *, field: str, resolve: bool = False) -> str:
    """The URL, or ServiceError naming `field` when it is not http(s) or reaches a non-public address.

    With `resolve`, the host name is looked up and every address it has must be public (a name that
    does not resolve is refused); without it only literal addresses and `localhost` are judged, so a
    save does not depend on DNS.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ServiceError("must be an http:// or https:// URL", field=field)
    if settings.ETL_ALERT_ALLOW_PRIVATE_URLS:
        return url
    host = parts.hostname.rstrip(".").lower()
    refused = (f"points at {host}, a loopback, link-local or private address; set ETL_ALERT_ALLOW_PRIVATE_URLS=true "
               "to allow internal receivers")
    if host == "localhost" or host.endswith(".localhost"):
        raise ServiceError(refused, field=field)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if _forbidden(literal):
            raise ServiceError(refused, field=field)
        return url
    if resolve:
        try:
            infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise ServiceError(f"host {host} does not resolve ({exc})", field=field) from None
        if any(_forbidden(ipaddress.ip_address(info[4][0].split("%")[0])) for info in infos):
            raise ServiceError(refused, field=field)
    return url
