"""A stand-in HTTP server on 127.0.0.1 for the APIs that cannot run here (Loki, the
Kubernetes API): the tests say what it answers, in the wire format those APIs document."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[str, dict[str, str], dict[str, str]], tuple[int, dict[str, str], bytes]]
"""``answer(path, query params, request headers (lower-case names)) -> (status, headers, body)``."""


@contextmanager
def serve(answer: Answer) -> Iterator[str]:
    """Serve GET requests with ``answer`` on a free loopback port; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 — http.server API
            parsed = urllib.parse.urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, reply_headers, body = answer(parsed.path, dict(urllib.parse.parse_qsl(parsed.query)), headers)
            self.send_response(status)
            for name, value in reply_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
