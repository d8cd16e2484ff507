"""Outgoing connections reach only global addresses: checked at every name resolution, pinned per host.

Inside `guarded_resolution()`, every name the process resolves on this
thread (or task) goes through the check: each address must be global
(`ipaddress.is_global`, with IPv4 embedded in IPv6 judged as IPv4, and the
6to4 and Teredo ranges refused outright) or inside one of the allowed
networks. The first answer for a host is kept for the rest of the block, so
a name that answers a public address to the check and an internal one to
the connection (DNS rebinding) still connects to the address checked. A
redirect to another host is resolved, and so checked, like the first hop.

It works by replacing `socket.getaddrinfo` once, at import, with a wrapper
that changes nothing outside a guarded block: http.client, urllib and
urllib3 (requests, Apprise) all resolve through it when they connect.
"""

from __future__ import annotations

import contextvars
import ipaddress
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from scheduler.core import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
EVERYWHERE: tuple[Network, ...] = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_system_getaddrinfo = socket.getaddrinfo
# (allowed networks, host -> pinned answers) of the guarded block this thread is in, else None
_guard: contextvars.ContextVar[tuple[tuple[Network, ...], dict[str, list]] | None] = contextvars.ContextVar(
    "etl_net_guard", default=None)


class AddressRefused(socket.gaierror):
    """A name resolved to an address outgoing requests may not reach."""


def parse_networks(values: Iterable[Any], *, field: str) -> tuple[Network, ...]:
    """CIDR texts ("10.20.0.0/16") as networks; ConfigError naming `field` for one that is not."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise ConfigError(field, f"{str(value)[:60]!r} is not a network such as 10.20.0.0/16") from None
    return tuple(networks)


def address_allowed(text: str, allowed: Iterable[Network] = ()) -> bool:
    """Whether outgoing requests may reach the address `text`: global, or inside an allowed network."""
    try:
        address = ipaddress.ip_address(str(text).split("%")[0])
    except ValueError:
        return False
    if any(address.version == net.version and address in net for net in allowed):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SIX_TO_FOUR or address in _TEREDO:
            return False  # they carry an IPv4 address a relay would reach for us
        embedded = address.ipv4_mapped or (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
                                           if address in _NAT64 else None)
        if embedded is not None:
            return address_allowed(str(embedded), allowed)
    return address.is_global and not address.is_multicast


def _with_port(info: tuple, port: Any) -> tuple:
    family, kind, proto, canon, sockaddr = info
    number = port if isinstance(port, int) else (int(port) if str(port or "").isdigit() else sockaddr[1])
    return (family, kind, proto, canon, (sockaddr[0], number, *sockaddr[2:]))


def _guarded_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - socket's own names
    guard = _guard.get()
    if guard is None:
        return _system_getaddrinfo(host, port, family, type, proto, flags)
    allowed, pins = guard
    key = (host.decode() if isinstance(host, bytes) else str(host)).rstrip(".").lower()
    if key not in pins:
        infos = _system_getaddrinfo(host, port, family, type, proto, flags)
        if not infos or not all(address_allowed(info[4][0], allowed) for info in infos):
            raise AddressRefused(socket.EAI_NONAME, f"{key} does not resolve to a global address only")
        pins[key] = infos
    answers = [_with_port(info, port) for info in pins[key] if not family or info[0] == family]
    if not answers:
        raise AddressRefused(socket.EAI_FAMILY, f"{key} has no checked address of that family")
    return answers


@contextmanager
def guarded_resolution(allowed: Iterable[Network] = ()) -> Iterator[dict[str, list]]:
    """Within the block every resolution is checked and pinned; yields host -> the pinned answers."""
    outer = _guard.get()
    pins: dict[str, list] = {} if outer is None else outer[1]
    token = _guard.set((tuple(allowed), pins))
    try:
        yield pins
    finally:
        _guard.reset(token)


def _install() -> None:
    if socket.getaddrinfo is not _guarded_getaddrinfo:
        socket.getaddrinfo = _guarded_getaddrinfo


_install()
