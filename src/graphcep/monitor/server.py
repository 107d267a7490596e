"""The monitor's HTTP server: the standard library's, on a thread of its own.

Paths: ``/metrics`` (Prometheus' text format, :mod:`~graphcep.monitor.exposition`), ``/``
(the live page, :mod:`~graphcep.monitor.page`), ``/api/state.json`` (the page's data:
:meth:`~graphcep.monitor.live.LiveNumbers.snapshot`) and ``/match/<number>.png`` (a kept
match drawn as ``graphcep draw`` draws it, drawn once and cached while the match is
kept). Every port serves every path: ``--metrics-port`` and ``--ui-port`` only say where
each is expected, and one port may serve both.

The ports are bound before the stream starts, so a port in use is one line before any
work. The address is 127.0.0.1 unless ``--monitor-host`` says otherwise: the page shows
the matches, which are the monitored network's own data.
"""

from __future__ import annotations

import errno
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from graphcep.io.sinks import SinkError
from graphcep.monitor.exposition import metrics_text
from graphcep.monitor.live import LiveNumbers
from graphcep.monitor.page import page_html

#: The address the monitor listens on unless told otherwise.
DEFAULT_HOST = "127.0.0.1"
#: The content type of Prometheus' text format.
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: matplotlib's pyplot keeps global state: one picture drawn at a time
_DRAWING = threading.Lock()


class MonitorError(SinkError):
    """A monitor port that cannot be served (in use, not allowed)."""


class Monitor:
    """The live numbers of a stream and the servers showing them.

    Parameters
    ----------
    numbers : LiveNumbers
        What is shown.
    ports : dict
        Option (``--metrics-port``) -> port; the same port named twice is served once.
    host : str
        The address to listen on.
    """

    def __init__(self, numbers: LiveNumbers, ports: dict[str, int],
                 host: str = DEFAULT_HOST) -> None:
        self.numbers = numbers
        self.host = host
        self._pictures: dict[int, bytes] = {}
        self._servers: list[ThreadingHTTPServer] = []
        self._served: dict[str, ThreadingHTTPServer] = {}  # option -> its server
        self._serving = False  # shutdown() waits for serve_forever: only once it runs
        by_port: dict[int, ThreadingHTTPServer] = {}
        try:
            for option, port in ports.items():
                if port == 0 or port not in by_port:  # 0: a port of the system's choice
                    by_port[port] = self._bind(port, ports)
                    self._servers.append(by_port[port])
                self._served[option] = by_port[port]
        except MonitorError:
            self.stop()
            raise

    def port(self, option: str) -> int:
        """The port serving ``option`` (the one the system gave for port 0)."""
        return int(self._served[option].server_address[1])

    def describe(self) -> str:
        """Where to look, in one line: ``metrics at http://127.0.0.1:9100/metrics; live
        page at http://127.0.0.1:8080/``."""
        where = []
        for option, server in self._served.items():
            address = f"http://{self.host}:{server.server_address[1]}/"
            where.append(f"metrics at {address}metrics" if option == "--metrics-port"
                         else f"live page at {address}")
        return "; ".join(where)

    def start(self) -> None:
        """Serve on daemon threads (they end with the process)."""
        for server in self._servers:
            threading.Thread(target=server.serve_forever, name="graphcep-monitor",
                             daemon=True).start()
        self._serving = True

    def stop(self) -> None:
        """Stop serving and free the ports."""
        for server in self._servers:
            if self._serving:
                server.shutdown()
            server.server_close()
        self._servers, self._serving = [], False

    def picture(self, number: int) -> bytes | None:
        """The PNG of kept match ``number`` (None: not kept)."""
        row = self.numbers.matches.row(number)
        if row is None:
            return None
        with _DRAWING:
            if number not in self._pictures:
                self._pictures = {n: png for n, png in self._pictures.items()
                                  if self.numbers.matches.row(n) is not None}
                self._pictures[number] = _drawn(row, self.numbers.matches.clock)
            return self._pictures[number]

    def _bind(self, port: int, ports: dict[str, int]) -> ThreadingHTTPServer:
        try:
            server = ThreadingHTTPServer((self.host, port), _handler(self))
        except OSError as err:
            options = " and ".join(option for option, given in ports.items() if given == port)
            why = ("in use by another process" if err.errno == errno.EADDRINUSE
                   else err.strerror or str(err))
            raise MonitorError(f"{options} {port}: cannot serve on {self.host}:{port}, "
                               f"{why}: name another port") from None
        server.daemon_threads = True
        return server


def _drawn(row: dict[str, Any], clock: Any) -> bytes:
    from graphcep.pictures.draw import render
    from graphcep.pictures.layout import lay_out
    from graphcep.pictures.records import drawing_of, timed_rows
    from graphcep.pictures.report import png

    (timed,) = timed_rows([row], clock) if clock is not None else [row]
    return png(render, lay_out(drawing_of(timed)))


def _handler(monitor: Monitor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(metrics_text(monitor.numbers.snapshot()).encode(), METRICS_TYPE)
            elif path in ("/", "/index.html"):
                self._send(page_html(monitor.numbers.query).encode(),
                           "text/html; charset=utf-8")
            elif path == "/api/state.json":
                body = json.dumps(monitor.numbers.snapshot(), default=str)
                self._send(body.encode(), "application/json")
            elif path.startswith("/match/") and path.endswith(".png") and \
                    path[len("/match/"):-len(".png")].isdigit():
                picture = monitor.picture(int(path[len("/match/"):-len(".png")]))
                if picture is None:  # never kept, or no longer
                    self._missing()
                else:
                    self._send(picture, "image/png")
            else:
                self._missing()

        def _send(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _missing(self) -> None:
            self.send_error(404, "no such page (/, /metrics, /api/state.json)")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet: the stream's stderr is its progress lines."""

    return Handler
