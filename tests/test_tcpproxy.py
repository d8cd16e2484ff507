"""The freezable TCP proxy the fencing test puts between a worker and PostgreSQL (tests/tcpproxy.py)."""
from __future__ import annotations

import socket
import threading

import pytest

from tests.tcpproxy import TcpProxy


class Echo:
    """A loopback echo server that counts the connections it accepted."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def echo():
    server = Echo()
    yield server
    server.close()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _connect(proxy: TcpProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    return sock


def test_bytes_flow_both_ways_through_the_proxy(echo):
    with TcpProxy(echo.address) as proxy, _connect(proxy) as sock:
        sock.sendall(b"ping")
        assert _recv_exactly(sock, 4) == b"ping"


def test_a_frozen_proxy_holds_the_bytes_keeps_the_sockets_and_delivers_everything_on_thaw(echo):
    with TcpProxy(echo.address) as proxy, _connect(proxy) as sock:
        sock.sendall(b"one")
        assert _recv_exactly(sock, 3) == b"one"

        proxy.freeze()
        sock.sendall(b"held")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(16)  # nothing comes back: a silent network, not an error and not an end of stream

        # a new connection is not refused; it just does not get through
        late = _connect(proxy)
        late.sendall(b"late")
        late.settimeout(0.5)
        with pytest.raises(TimeoutError):
            late.recv(16)
        assert echo.accepted == 1

        proxy.thaw()
        sock.settimeout(10)
        late.settimeout(10)
        assert _recv_exactly(sock, 4) == b"held"
        assert _recv_exactly(late, 4) == b"late"
        assert echo.accepted == 2
        sock.sendall(b"two")
        assert _recv_exactly(sock, 3) == b"two"
        late.close()


def test_closing_the_proxy_ends_its_connections(echo):
    proxy = TcpProxy(echo.address).start()
    sock = _connect(proxy)
    sock.sendall(b"x")
    assert _recv_exactly(sock, 1) == b"x"
    proxy.freeze()
    proxy.close()  # even a frozen one
    assert sock.recv(16) == b""
    sock.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
