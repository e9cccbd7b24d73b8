"""A raw socket client for server tests: hostile heads, lying lengths, silent clients."""

import socket


def raw_exchange(server, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it (or ``wait`` passes)."""
    with socket.create_connection((server.host, server.port), timeout=wait) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):  # the server refused the head before we finished
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (socket.timeout, ConnectionResetError):  # a reset after the answer: we were still sending
            pass
        return b"".join(chunks)
