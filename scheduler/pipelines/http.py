"""Records from a JSON HTTP API (urllib only, no extra dependency)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.core import ConfigError, EtlError, stop

from .connections import resolve_connection
from .netguard import guarded_resolution, parse_networks
from .values import iso_utc, window_bounds

# 4xx answers that say "try again later" rather than "your request is wrong".
_TRANSIENT_4XX = {408, 425, 429}


class HttpError(EtlError):
    """A non-2xx answer; 4xx other than 408/425/429 are permanent (not retried)."""

    def __init__(self, status: int, url: str, detail: str = "") -> None:
        self.status = status
        self.url = url
        self.detail = detail
        self.permanent = 400 <= status < 500 and status not in _TRANSIENT_4XX
        text = f"GET {url} returned HTTP {status}"
        super().__init__(f"{text}: {detail}" if detail else text)

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (self.status, self.url, self.detail))


def _check_str_map(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(field, "must be a dict with string keys")
    return {k: str(v) for k, v in value.items()}


def _param(value: Any) -> str:
    return iso_utc(value) if isinstance(value, datetime) else str(value)


def _from_connection(name: str, path: str) -> tuple[str, dict[str, str]]:
    """(base URL + path, auth headers) of an http connection: basic auth with a login, else a bearer token
    (its password); headers listed in its extra `headers` (non-secret) go along."""
    info = resolve_connection(name)
    if info.kind != "http":
        raise ConfigError("connection", f"connection '{name}' is a {info.kind} connection, not an http one")
    if not isinstance(path, str) or "://" in path:
        raise ConfigError("path", "must be a path below the connection's URL, such as 'orders'")
    base = info.base_url()
    url = base.rstrip("/") + ("/" + path.lstrip("/") if path else "")
    headers: dict[str, str] = {}
    if info.login:
        token = base64.b64encode(f"{info.login}:{info.password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    elif info.password:
        headers["Authorization"] = f"Bearer {info.password}"
    return url, headers


class HttpJsonSource:
    """GETs `url` and yields the records found at `records_path` of the JSON body.

    `records_path` is a dotted path (`data.items`; digits index lists). The
    window goes out as query parameters named by `window_params`
    (`since`, `until` by default); an open upper end sends no `until`.

    The request reaches only global addresses, every redirect hop included,
    each host pinned to the address checked (pipelines/netguard.py);
    `allowed_networks` (CIDRs, from the pipeline's definition or settings) lets
    it reach an internal API.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        connection: str | None = None,
        path: str = "",
        records_path: str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10,
        window: Any = None,
        window_params: Sequence[str] = ("since", "until"),
        allowed_networks: Sequence[str] = (),
    ) -> None:
        auth: dict[str, str] = {}
        if (url is None) == (connection is None):
            raise ConfigError("url", "give exactly one of url or connection (an http connection's name)")
        if connection is not None:
            url, auth = _from_connection(connection, path)
        if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError("url", f"must be an http:// or https:// URL, got {url!r}")
        if not urllib.parse.urlsplit(url).netloc:
            raise ConfigError("url", f"has no host: {url!r}")
        self.url = url
        if records_path is not None and (not isinstance(records_path, str) or not records_path.strip(".")):
            raise ConfigError("records_path", "must be a dotted path such as 'data.items'")
        self.records_path = records_path
        self.params = _check_str_map(params, "params")
        self.headers = {"Accept": "application/json", "User-Agent": "etl-scheduler"}
        self.headers.update({**auth, **_check_str_map(headers, "headers")})
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError("timeout", "must be a positive number of seconds")
        self.timeout = timeout
        self.low, self.high = window_bounds(window)
        if (
            isinstance(window_params, str)
            or len(window_params) != 2
            or not all(isinstance(p, str) and p for p in window_params)
        ):
            raise ConfigError("window_params", "must be two parameter names, e.g. ('since', 'until')")
        self.window_params = tuple(window_params)
        if isinstance(allowed_networks, str):
            raise ConfigError("allowed_networks", "must be a list of networks such as ['10.20.0.0/16']")
        self.allowed_networks = parse_networks(allowed_networks, field="allowed_networks")

    def __repr__(self) -> str:
        return f"HttpJsonSource({self.url!r})"

    def request_url(self) -> str:
        query = dict(self.params)
        for name, bound in zip(self.window_params, (self.low, self.high)):
            if bound is not None:
                query[name] = _param(bound)
        if not query:
            return self.url
        sep = "&" if urllib.parse.urlsplit(self.url).query else "?"
        return self.url + sep + urllib.parse.urlencode(query)

    def fetch(self) -> Any:
        """The decoded JSON body."""
        url = self.request_url()
        request = urllib.request.Request(url, headers=self.headers, method="GET")
        try:
            with guarded_resolution(self.allowed_networks), \
                    urllib.request.urlopen(request, timeout=self.timeout) as response:
                status = response.status
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", "replace").strip()
            raise HttpError(exc.code, url, detail) from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EtlError(f"{reason}\nwhile fetching GET {url}") from exc
        if not 200 <= status < 300:
            raise HttpError(status, url)
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EtlError(f"GET {url} did not return JSON: {exc}") from exc

    def records(self, body: Any) -> list[Any]:
        """The list at `records_path` (or the body itself); one object becomes a list of one."""
        node = body
        for part in (self.records_path or "").split("."):
            if not part:
                continue
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise EtlError(f"{self!r}: the response has nothing at {self.records_path!r}")
        if isinstance(node, list):
            return node
        if isinstance(node, Mapping):
            return [node]
        raise EtlError(f"{self!r}: expected a list of records, got {type(node).__name__}")

    def extract(self) -> Iterator[Any]:
        stop.check()
        yield from self.records(self.fetch())
