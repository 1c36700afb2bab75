"""A network path to a real server that a test can cut: the site link going down.

``TcpLink`` listens on a free 127.0.0.1 port and relays every connection, byte for byte, to a real
server (it answers nothing itself). ``cut()`` closes the listening socket and every relayed
connection: from then on clients get "connection refused", as from a server that was killed, while
the server itself keeps running for the other tests of the session (the real hot HBase, whose
ZooKeeper lives inside its JVM, is shared by the session).
"""

from __future__ import annotations

import socket
import threading

from tests.support.procs import free_port


class TcpLink:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.cut_done = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpLink:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._listener = s
        threading.Thread(target=self._accept, name=f"link-{self.port}", daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self.cut_done:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self.cut_done:
                    client.close()
                    server.close()
                    return
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """The link goes down: no new connection is accepted, every open one is closed."""
        with self._lock:
            self.cut_done = True
            conns, self._conns = self._conns, []
        if self._listener is not None:
            try:  # wakes the thread blocked in accept() and stops listening (close alone may not)
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
