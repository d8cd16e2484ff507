"""A TCP proxy on loopback that a test can freeze: a network cut off, not a server that refuses.

    proxy = TcpProxy(("127.0.0.1", 5432)).start()
    url = f"postgres://postgres@127.0.0.1:{proxy.port}/db"   # clients go through the proxy
    proxy.freeze()   # no byte moves in either direction; every socket stays open
    proxy.thaw()     # what was held is delivered, in order; traffic flows again
    proxy.close()

While frozen, a client's writes pile up in the proxy (then in the kernel's
buffers, then the client blocks) and its reads wait: exactly what a worker
sees when the network to its database goes silent. A new connection is
accepted (the handshake succeeds, as with a silent network) but reaches the
upstream only when thawed. Nothing is dropped, so after `thaw` both ends carry
on where they were.
"""
from __future__ import annotations

import socket
import threading

CHUNK = 65536


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.guard = threading.Lock()
        self.accepted = 0

    # --- control --------------------------------------------------------------
    def start(self) -> "TcpProxy":
        threading.Thread(target=self._accept, name=f"tcpproxy-{self.port}", daemon=True).start()
        return self

    def freeze(self) -> None:
        """Stop moving bytes, both ways, on every connection (old and new); keep every socket open."""
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    @property
    def frozen(self) -> bool:
        return not self.flowing.is_set()

    def close(self) -> None:
        self.closed.set()
        self.flowing.set()  # release the threads held by a freeze, so they see the end
        _shut(self.listener)  # shutdown first: a bare close leaves the thread in accept() listening
        with self.guard:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            _shut(sock)

    def __enter__(self) -> "TcpProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the work ---------------------------------------------------------------
    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            self._keep(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self.flowing.wait()  # frozen: the client is connected, but nothing reaches the server yet
        if self.closed.is_set():
            return
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            _shut(client)
            return
        self._keep(server)
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            self.flowing.wait()
            try:
                data = src.recv(CHUNK)
            except OSError:
                data = b""
            # frozen while the bytes were on their way: they are held, not dropped, until the thaw
            self.flowing.wait()
            if self.closed.is_set():
                return
            if not data:  # one side hung up: so does the other
                _shut(dst)
                _shut(src)
                return
            try:
                dst.sendall(data)
            except OSError:
                _shut(src)
                return

    def _keep(self, sock: socket.socket) -> None:
        with self.guard:
            self.sockets.append(sock)
        if self.closed.is_set():
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


__all__ = ["TcpProxy"]
