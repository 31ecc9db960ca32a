"""A TCP-to-Unix-socket forwarder: one "host" (network namespace) reaching shared services.

`python -m chaos.bridge PORT=SOCKET [PORT=SOCKET ...]` listens on
127.0.0.1:PORT and pipes each connection to the Unix socket SOCKET. Run
inside a network namespace, it gives the processes there a loopback
address for the database and the SMTP server while the bytes cross to the
test's servers through the file system: no routable address is ever used.
Taking the namespace's loopback down (`ip link set lo down`) then cuts that
host off exactly as a network partition would. Bounded: it exits when its
parent (the test) is gone.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

CHUNK = 64 * 1024


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()


def _serve(port: int, path: str) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def main(argv: list[str]) -> int:
    parent = os.getppid()
    for spec in argv:
        port, _, path = spec.partition("=")
        threading.Thread(target=_serve, args=(int(port), path), daemon=True).start()
    print("bridge ready", flush=True)
    while os.getppid() == parent:  # the test that started us is still there
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
