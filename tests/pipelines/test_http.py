import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from scheduler.core import ConfigError, EtlError, RetryPolicy, Window, with_retry
from scheduler.pipelines.http import HttpError, HttpJsonSource

LOCAL = ["127.0.0.0/8"]  # the test servers listen on loopback, which the source refuses by default


class Handler(BaseHTTPRequestHandler):
    # Set per test by the `server` fixture.
    routes: ClassVar[dict] = {}
    seen: ClassVar[list] = []

    def do_GET(self):
        parts = urlsplit(self.path)
        self.seen.append((parts.path, parse_qs(parts.query), dict(self.headers)))
        status, body = self.routes.get(parts.path, (404, {"error": "not found"}))
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.routes = {}
    Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", Handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_http_source_yields_records_at_the_dotted_path(server):
    base, handler = server
    handler.routes["/orders"] = (200, {"data": {"items": [{"id": 1}, {"id": 2}]}, "next": None})
    source = HttpJsonSource(base + "/orders", allowed_networks=LOCAL, records_path="data.items",
                            headers={"Authorization": "Bearer t"})
    assert list(source.extract()) == [{"id": 1}, {"id": 2}]
    assert handler.seen[0][2]["Authorization"] == "Bearer t"


def test_http_source_sends_the_window_as_query_params(server):
    base, handler = server
    handler.routes["/orders"] = (200, [])
    low = datetime(2024, 5, 1, tzinfo=UTC)
    high = datetime(2024, 5, 1, 1, tzinfo=UTC)
    list(HttpJsonSource(base + "/orders", allowed_networks=LOCAL, params={"page_size": 100},
                        window=Window(low, high)).extract())
    assert handler.seen[0][1] == {
        "page_size": ["100"],
        "since": ["2024-05-01T00:00:00.000000+00:00"],
        "until": ["2024-05-01T01:00:00.000000+00:00"],
    }


def test_http_source_omits_the_upper_bound_of_an_open_integer_window(server):
    base, handler = server
    handler.routes["/events"] = (200, {"events": []})
    list(HttpJsonSource(base + "/events?kind=a", allowed_networks=LOCAL, window=Window(41, None),
                        window_params=("after", "upto")).extract())
    assert handler.seen[0][1] == {"kind": ["a"], "after": ["41"]}


def test_http_source_raises_with_status_and_url_on_an_error_answer(server):
    base, handler = server
    handler.routes["/broken"] = (503, {"error": "maintenance"})
    with pytest.raises(HttpError) as err:
        list(HttpJsonSource(base + "/broken", allowed_networks=LOCAL).extract())
    assert err.value.status == 503
    assert err.value.url == base + "/broken"
    assert "HTTP 503" in str(err.value) and "maintenance" in str(err.value)
    assert not err.value.permanent


def test_http_client_errors_are_permanent_so_retries_stop(server):
    base, _ = server
    calls = []
    source = HttpJsonSource(base + "/missing", allowed_networks=LOCAL)

    def attempt():
        calls.append(1)
        return list(source.extract())

    with pytest.raises(HttpError) as err:
        with_retry(RetryPolicy(max_attempts=5), attempt, sleep=lambda s: None)
    assert err.value.status == 404 and err.value.permanent
    assert len(calls) == 1


def test_http_source_refuses_a_body_that_is_not_json(server):
    base, handler = server
    handler.routes["/html"] = (200, b"<html>")
    with pytest.raises(EtlError, match="did not return JSON"):
        list(HttpJsonSource(base + "/html", allowed_networks=LOCAL).extract())


def test_http_source_says_when_the_records_path_is_missing(server):
    base, handler = server
    handler.routes["/x"] = (200, {"data": {}})
    with pytest.raises(EtlError, match="nothing at 'data.items'"):
        list(HttpJsonSource(base + "/x", allowed_networks=LOCAL, records_path="data.items").extract())


def test_http_source_connection_refused_is_a_retryable_etl_error():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EtlError, match=r"^\[Errno \d+\] Connection refused\nwhile fetching GET http:") as err:
        list(HttpJsonSource(f"http://127.0.0.1:{port}/", allowed_networks=LOCAL, timeout=2).extract())
    assert not getattr(err.value, "permanent", False)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"url": "ftp://x/y"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "http://h", "timeout": 0}, "timeout"),
        ({"url": "http://h", "window_params": ("since",)}, "window_params"),
        ({"url": "http://h", "headers": ["x"]}, "headers"),
        ({"url": "http://h", "records_path": ""}, "records_path"),
    ],
)
def test_http_source_refuses_bad_configuration_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        HttpJsonSource(**kwargs)
    assert err.value.field == field
