"""Outgoing requests reach only global addresses, at every hop, pinned to the address checked (issue 22)."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduler.core import EtlError
from scheduler.pipelines import netguard
from scheduler.pipelines.http import HttpJsonSource
from scheduler.pipelines.netguard import AddressRefused, address_allowed, guarded_resolution, parse_networks


@pytest.mark.parametrize("address", ["100.64.0.1", "2002::1", "2002:7f00:1::", "64:ff9b::7f00:1", "::ffff:10.0.0.1",
                                     "127.0.0.1", "169.254.169.254", "10.1.2.3", "fd00::1", "::1", "2001::1",
                                     "224.0.0.1", "0.0.0.0", "not an address"])
def test_what_is_not_global_is_refused(address):
    assert address_allowed(address) is False


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "64:ff9b::5db8:d822"])
def test_global_addresses_pass(address):
    assert address_allowed(address) is True


def test_an_allowed_network_lets_an_internal_address_through():
    assert address_allowed("10.20.1.2", parse_networks(["10.20.0.0/16"], field="f")) is True
    assert address_allowed("10.21.1.2", parse_networks(["10.20.0.0/16"], field="f")) is False


class Rebinding:
    """A resolver stub: the first answer for a name is `first`, every later one `then` (DNS rebinding)."""

    def __init__(self, first: str, then: str) -> None:
        self.first, self.then, self.calls = first, then, []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002
        self.calls.append(host)
        if host in ("127.0.0.1", "169.254.169.254", "10.0.0.5"):
            address = host  # a literal resolves to itself
        else:
            address = self.first if self.calls.count(host) == 1 else self.then
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port if isinstance(port, int) else 80))]


def test_a_name_is_pinned_to_its_first_checked_answer(monkeypatch):
    stub = Rebinding("93.184.216.34", "127.0.0.1")
    monkeypatch.setattr(netguard, "_system_getaddrinfo", stub)
    with guarded_resolution():
        first = socket.getaddrinfo("rebind.example", 443)
        again = socket.getaddrinfo("rebind.example", 80)
    assert first[0][4] == ("93.184.216.34", 443) and again[0][4] == ("93.184.216.34", 80)
    assert stub.calls == ["rebind.example"]
    with pytest.raises(AddressRefused):  # a new block checks afresh: the name now answers loopback
        with guarded_resolution():
            socket.getaddrinfo("rebind.example", 443)


@pytest.fixture
def server():
    class Handler(BaseHTTPRequestHandler):
        redirect_to = None

        def do_GET(self):
            if Handler.redirect_to:
                self.send_response(302)
                self.send_header("Location", Handler.redirect_to)
                self.end_headers()
                return
            body = json.dumps([{"id": 1}]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd.server_address[1], Handler
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_the_http_source_connects_to_the_address_it_checked(server, monkeypatch):
    port, _handler = server
    stub = Rebinding("127.0.0.1", "10.0.0.5")  # checked (allowed below), then rebound to an internal address
    monkeypatch.setattr(netguard, "_system_getaddrinfo", stub)
    source = HttpJsonSource(f"http://api.example:{port}/orders", allowed_networks=["127.0.0.1/32"])
    assert list(source.extract()) == [{"id": 1}]
    assert stub.calls.count("api.example") == 1


def test_the_http_source_refuses_a_name_that_resolves_inside(server, monkeypatch):
    port, _handler = server
    monkeypatch.setattr(netguard, "_system_getaddrinfo", Rebinding("127.0.0.1", "127.0.0.1"))
    with pytest.raises(EtlError) as info:
        list(HttpJsonSource(f"http://api.example:{port}/orders").extract())
    assert "global address" in str(info.value)


def test_every_redirect_hop_is_checked(server, monkeypatch):
    port, handler = server
    handler.redirect_to = "http://169.254.169.254/latest/meta-data/"
    stub = Rebinding("127.0.0.1", "127.0.0.1")
    monkeypatch.setattr(netguard, "_system_getaddrinfo", stub)
    with pytest.raises(EtlError) as info:
        list(HttpJsonSource(f"http://api.example:{port}/orders", allowed_networks=["127.0.0.1/32"]).extract())
    assert "169.254.169.254 does not resolve to a global address" in str(info.value)
