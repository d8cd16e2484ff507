"""Alert channels are Apprise URLs: parse, check, mask and send one.

A channel list is text, one URL per line (a JSON list or a Python list is taken
too). Every URL must be one Apprise can use (`mailto://`, `slack://`,
`workflows://` for Microsoft Teams, `ntfy://`, `json://`, ...), checked when it
is saved. Two rules of our own sit on top of Apprise:

- `mailto://` / `mailtos://` without a password (no SMTP login in the URL) is
  sent through Django's EMAIL_BACKEND to the URL's recipients: Django's mail
  settings stay the one place where the SMTP server is configured, and tests
  read `mail.outbox`. With a password, Apprise's own mailer logs in to the
  SMTP server the URL names.
- `etlhook://` / `etlhooks://` is our signed JSON webhook (http / https): the
  body is the alert as JSON, signed like our incoming webhooks
  (`X-Etl-Timestamp`, `X-Etl-Signature`, see webhooks.sign_webhook) with the
  team's secret, retried WEBHOOK_ATTEMPTS times. Plain `json://` is Apprise's
  unsigned JSON.

The SSRF guard (netcheck.check_outgoing_url) applies to every URL that names a
host we connect to (json, xml, form, ntfy with a host, gotify, workflows,
etlhook, a mailto with an SMTP login, ...): the host comes from the parsed
Apprise plugin, judged when saved and again, after name resolution, right
before sending. URLs are shown masked everywhere (`mask_url`).
"""
from __future__ import annotations

import contextvars
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import apprise
from apprise.decorators import notify as apprise_notify
from django.conf import settings
from django.core.mail import send_mail

from scheduler.services.errors import InvalidInput, ServiceError
from scheduler.services.netcheck import check_outgoing_url, outgoing_guard
from scheduler.services.webhooks import sign_webhook

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT = 5.0
WEBHOOK_ATTEMPTS = 3
WEBHOOK_BACKOFF = 0.5  # seconds before the 2nd attempt, doubling after
MAX_CHANNELS = 20
MAX_URL_LENGTH = 2000
MAIL_SCHEMES = ("mailto", "mailtos")
SIGNED_SCHEMES = {"etlhook": "http", "etlhooks": "https"}
# Apprise's generic query keys, dropped from what is shown (they are the defaults and only make URLs long)
_NOISE = {"overflow", "retry", "wait", "optional", "cto", "format", "emojis", "tz", "method", "verify", "rto"}
_PASSWORD_RE = re.compile(r"(://[^/:@\s]*:)[^@/\s]*@")

# what the signed webhook sends and signs: set by `send_channel` around one Apprise call on this thread
_signed: contextvars.ContextVar[dict | None] = contextvars.ContextVar("etl_signed_hook", default=None)


# --- the signed webhook: a small Apprise plugin -------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a new target: following it could lead past the guard."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def post_json(url: str, payload: dict, *, secret: str = "", attempts: int = WEBHOOK_ATTEMPTS,
              timeout: float = WEBHOOK_TIMEOUT, backoff: float | None = None, sleep=time.sleep) -> None:
    """POST signed JSON with retries; raises the last error when every attempt failed."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"alert webhook URL must be http(s), got {url!r}")
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "etl-scheduler-alerts"}
    backoff = WEBHOOK_BACKOFF if backoff is None else backoff
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        if secret:
            # re-signed per attempt: each carries a fresh timestamp for the receiver's replay window
            headers.update(sign_webhook(secret, body))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                if 200 <= response.status < 300:
                    return
                last = RuntimeError(f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            last = RuntimeError(f"HTTP {exc.code}" + (" (redirects are not followed)" if 300 <= exc.code < 400 else ""))
            if 300 <= exc.code < 500 and exc.code not in (408, 429):
                break  # the receiver refuses this alert; retrying will not change its mind
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            last = exc
    raise RuntimeError(f"{mask_url(url)}: {last}")


def signed_target(url: str) -> str:
    """The http(s) URL an etlhook(s):// URL posts to."""
    parts = urllib.parse.urlsplit(url.strip())
    return urllib.parse.urlunsplit((SIGNED_SCHEMES[parts.scheme.lower()], parts.netloc, parts.path or "/",
                                    parts.query, ""))


def _send_signed(body, title, notify_type, meta, *args, **kwargs) -> bool:
    job = _signed.get() or {}
    payload = job.get("payload") or {"title": title, "message": body, "type": str(notify_type)}
    try:
        post_json(signed_target(meta["url"]), payload, secret=job.get("secret", ""), sleep=job.get("sleep", time.sleep))
    except (RuntimeError, ValueError) as exc:
        job.setdefault("errors", []).append(str(exc))
        return False
    return True


for _scheme in SIGNED_SCHEMES:
    apprise_notify(on=_scheme, name="ETL scheduler signed JSON webhook")(_send_signed)


# --- parsing, checking, masking -------------------------------------------------

def split_channels(value: Any, *, field: str) -> list[str]:
    """The URLs of a channel list given as text (one per line, or a JSON list) or a list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ServiceError(f"looks like a JSON list but is not one ({exc})", field=field) from None
        else:
            value = text.splitlines()
    if not isinstance(value, (list, tuple)):
        raise ServiceError(f"must be Apprise URLs, one per line, or a list of them; got {type(value).__name__}",
                           field=field)
    urls: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ServiceError(f"each channel must be a URL string, got {type(item).__name__}", field=field)
        if item.strip() and item.strip() not in urls:
            urls.append(item.strip())
    return urls


def channels_text(urls: list[str]) -> str:
    return "\n".join(urls)


def _shown_raw(url: str) -> str:
    """A URL Apprise cannot read, shown with any password in it hidden."""
    return _PASSWORD_RE.sub(r"\1****@", url)[:120]


def _asset() -> apprise.AppriseAsset:
    # one thread per send (contextvars reach the signed-webhook plugin), nothing written to disk, and no HTTP
    # redirect followed: a public receiver must not bounce a notification past the guard to an internal address
    return apprise.AppriseAsset(async_mode=False, storage_mode="memory", http_redirects=False)


def instantiate(url: str):
    """The Apprise plugin for `url`, or None when Apprise cannot use it."""
    try:
        plugin = apprise.Apprise.instantiate(url, asset=_asset())
    except Exception:  # Apprise raises on some malformed URLs instead of answering None  # noqa: BLE001
        return None
    if plugin is not None and hasattr(plugin, "redirects"):
        plugin.redirects = False  # not even when the URL asks for it (?redirect=yes)
    return plugin


def parse_channel(url: str, *, field: str):
    """The plugin for `url`; ServiceError naming the field and the URL when Apprise cannot use it."""
    if "\x00" in url or len(url) > MAX_URL_LENGTH:
        raise ServiceError(f"a channel URL must be at most {MAX_URL_LENGTH} characters without NUL", field=field)
    plugin = instantiate(url)
    if plugin is None:
        raise ServiceError(f"{_shown_raw(url)!r} is not a URL Apprise can send to (see docs/notifications.md for "
                           "examples: mailto://, slack://, workflows://, ntfy://, json://, etlhooks://)", field=field)
    return plugin


def uses_django_mail(url: str, plugin=None) -> bool:
    """A mailto:// URL without an SMTP password goes through Django's EMAIL_BACKEND."""
    scheme = url.split("://", 1)[0].lower()
    if scheme not in MAIL_SCHEMES:
        return False
    plugin = plugin or instantiate(url)
    return plugin is not None and not getattr(plugin, "password", None)


def mail_recipients(plugin) -> list[str]:
    return [address for _name, address in getattr(plugin, "targets", []) if address]


def mask_url(url: str) -> str:
    """`url` with its secrets masked (Apprise's privacy view), for pages, the admin, the audit log and logs."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in SIGNED_SCHEMES:
        return _shown_raw(url)
    plugin = instantiate(url)
    if plugin is None:
        return _shown_raw(url)
    shown = plugin.url(privacy=True)
    parts = urllib.parse.urlsplit(shown)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k not in _NOISE]
    path = "" if parts.path == "/" and not query else parts.path
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode(query), parts.fragment))


def mask_text(text: str, urls: list[str]) -> str:
    """`text` (an error, a log line) with every one of `urls` replaced by its masked form."""
    for url in sorted(urls, key=len, reverse=True):
        if url:
            text = text.replace(url, mask_url(url))
    return _PASSWORD_RE.sub(r"\1****@", text)


def guard(url: str, *, field: str, resolve: bool, plugin=None) -> None:
    """The SSRF guard for a channel that names a host we connect to; ServiceError when it points inside."""
    plugin = plugin or parse_channel(url, field=field)
    scheme = url.split("://", 1)[0].lower()
    if scheme in MAIL_SCHEMES:
        if uses_django_mail(url, plugin):
            return  # Django's own SMTP settings, not the URL, say where it goes
        host, port = getattr(plugin, "smtp_host", "") or plugin.host, plugin.port
    elif scheme in SIGNED_SCHEMES:
        target = urllib.parse.urlsplit(signed_target(url))
        host, port = target.hostname or "", target.port
        if not host:
            raise ServiceError(f"{mask_url(url)}: a signed webhook needs a host (etlhooks://host/path)", field=field)
    elif "{host}" in " ".join(getattr(type(plugin), "templates", ())):
        host, port = getattr(plugin, "host", "") or "", getattr(plugin, "port", None)
    else:
        return  # a cloud service's fixed address (slack, telegram, ntfy.sh, ...)
    if not host:
        return
    netloc = f"[{host}]" if ":" in host else host
    try:
        check_outgoing_url(f"https://{netloc}{f':{port}' if port else ''}/", field=field, resolve=resolve)
    except ServiceError as exc:
        raise ServiceError(f"{mask_url(url)}: {exc.problem}", field=field) from None


def check_channels(value: Any, *, field: str, resolve: bool = False) -> list[str]:
    """The URLs of `value`, each parsed by Apprise and past the guard; InvalidInput naming every bad one."""
    urls = split_channels(value, field=field)
    if len(urls) > MAX_CHANNELS:
        raise ServiceError(f"at most {MAX_CHANNELS} channels, got {len(urls)}", field=field)
    errors: list[ServiceError] = []
    for url in urls:
        try:
            guard(url, field=field, resolve=resolve, plugin=parse_channel(url, field=field))
        except ServiceError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InvalidInput(errors)
    return urls


def uses_signing(urls: list[str]) -> bool:
    return any(url.split("://", 1)[0].lower() in SIGNED_SCHEMES for url in urls)


# --- sending one channel --------------------------------------------------------------

class _ThreadLog(logging.Handler):
    """Apprise's warnings on this thread only (the alert pool sends on several threads at once)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage())


def send_channel(url: str, *, title: str, body: str, payload: dict, secret: str = "", field: str = "channel",
                 sleep=time.sleep) -> None:
    """Send one notification to `url` through the guard and Apprise; raises RuntimeError/ServiceError on failure.

    The guard runs here, after name resolution, right before sending: a name may have come to point inside
    since the URL was saved.
    """
    plugin = parse_channel(url, field=field)
    if uses_django_mail(url, plugin):
        guard(url, field=field, resolve=True, plugin=plugin)
        send_mail(title, body, settings.DEFAULT_FROM_EMAIL, mail_recipients(plugin), fail_silently=False)
        return
    # the guard's resolution pins each host for the send: every later hop and connection is checked
    # against the same addresses (no DNS rebinding between the check and the connection)
    with outgoing_guard():
        guard(url, field=field, resolve=True, plugin=plugin)
        _notify(url, plugin, title=title, body=body, payload=payload, secret=secret, sleep=sleep)


def _notify(url: str, plugin, *, title: str, body: str, payload: dict, secret: str, sleep) -> None:
    job = {"payload": payload, "secret": secret, "sleep": sleep, "errors": []}
    token = _signed.set(job)
    capture = _ThreadLog()
    apprise_log = logging.getLogger(apprise.LOGGER_NAME)
    apprise_log.addHandler(capture)
    try:
        ok = plugin.notify(body=body, title=title, notify_type=apprise.NotifyType.FAILURE)
    finally:
        apprise_log.removeHandler(capture)
        _signed.reset(token)
    if not ok:
        reason = "; ".join(job["errors"] or capture.lines[-2:]) or "Apprise reported a failure"
        raise RuntimeError(mask_text(f"{mask_url(url)}: {reason}", [url])[:500])


def unmask_channels(new: list[str], old: list[str]) -> list[str]:
    """`new` with every URL that is the masked form of one of `old` replaced by that stored URL.

    Pages, forms and the schedules file show channels masked; saving what was shown keeps the secrets.
    """
    masked = {mask_url(url): url for url in old}
    return [masked.get(url, url) for url in new]
