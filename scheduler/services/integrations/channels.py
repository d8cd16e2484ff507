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
- `etlhook://` / `etlhooks://` is our signed JSON webhook (http / https), a
  subclass of Apprise's JSON plugin: the body is the alert as JSON, signed
  like our incoming webhooks (`X-Etl-Timestamp`, `X-Etl-Signature`, see
  webhooks.sign_webhook) with the team's secret; Apprise's dispatcher tries it
  WEBHOOK_ATTEMPTS times. Plain `json://` is Apprise's unsigned JSON.

The SSRF guard (netcheck.check_outgoing_url) applies to every URL that names a
host we connect to (json, xml, form, ntfy with a host, gotify, workflows,
etlhook, a mailto with an SMTP login, ...): the host comes from the parsed
Apprise plugin, judged when saved and again, after name resolution, right
before sending. URLs are shown masked everywhere (`mask_url`).
"""
from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

import apprise
import requests
from apprise.plugins import N_MGR
from apprise.plugins.custom_json import NotifyJSON
from django.conf import settings
from django.core.mail import EmailMessage

from scheduler.services.common.errors import InvalidInput, ServiceError
from scheduler.services.common.netcheck import check_outgoing_url, outgoing_guard
from scheduler.services.admission.webhooks import sign_webhook

WEBHOOK_ATTEMPTS = 3  # a signed webhook's tries within one delivery (Apprise's retry); the queue retries later
WEBHOOK_WAIT = 1.0  # seconds between them (Apprise's wait)
MAX_CHANNELS = 20
MAX_URL_LENGTH = 2000
MAIL_SCHEMES = ("mailto", "mailtos")
SIGNED_SCHEMES = ("etlhook", "etlhooks")
# Apprise's generic query keys, dropped from what is shown (they are the defaults and only make URLs long)
_NOISE = {"overflow", "retry", "wait", "optional", "cto", "format", "emojis", "tz", "method", "verify", "rto"}
_PASSWORD_RE = re.compile(r"(://[^/:@\s]*:)[^@/\s]*@")

# --- the signed webhook: Apprise's JSON plugin with our body and signature -------------------

class NotifySignedJSON(NotifyJSON):
    """`etlhook://` / `etlhooks://`: Apprise's JSON webhook whose body is the alert as JSON, signed.

    Everything but the body and the signature is Apprise's: URL parsing, the privacy view, custom
    `+headers` and `-params`, timeouts, certificate checks, throttling, and the retries within one delivery
    (Apprise's dispatcher: WEBHOOK_ATTEMPTS in all unless the URL says `?retry=N`). Each attempt is signed
    afresh, so each carries a timestamp inside the receiver's replay window.
    """

    service_name = "ETL scheduler signed JSON webhook"
    protocol = "etlhook"
    secure_protocol = "etlhooks"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        if kwargs.get("retry") is None:
            self.retry = WEBHOOK_ATTEMPTS - 1
        if kwargs.get("wait") is None:
            self.wait = WEBHOOK_WAIT
        self.redirects = False
        self.etl_payload: dict | None = None  # the alert: send_channel sets it on this instance
        self.etl_secret = ""

    @staticmethod
    def parse_url(url):
        """Apprise's JSON parsing, and a plain query argument (`?token=abc`, not one of Apprise's own
        settings) goes along with the POST as the old alert webhook URL's query did (Apprise's `-token=abc`)."""
        results = NotifyJSON.parse_url(url)
        if results:
            own = {key.lower() for key in NotifyJSON.template_args}
            pairs = [item.partition("=") for item in urllib.parse.urlsplit(url).query.split("&") if item]
            plain = {urllib.parse.unquote(k): urllib.parse.unquote(v) for k, _eq, v in pairs
                     if k and k[:1] not in "+-:" and urllib.parse.unquote(k).lower() not in own}
            results["params"] = {**plain, **results.get("params", {})}
        return results

    def send(self, body, title="", notify_type=apprise.NotifyType.INFO, **kwargs) -> bool:
        payload = self.etl_payload or {"title": title, "message": body, "type": str(notify_type)}
        data = json.dumps(payload, sort_keys=True).encode()
        headers = {"User-Agent": "etl-scheduler-alerts", "Content-Type": "application/json", **self.headers}
        if self.etl_secret:
            headers.update(sign_webhook(self.etl_secret, data))
        self.throttle()
        try:
            response = requests.post(self.request_url, data=data, params=self.params, headers=headers,
                                     auth=self.request_auth, verify=self.verify_certificate,
                                     timeout=self.request_timeout, allow_redirects=False)
        except requests.RequestException as exc:
            self.logger.warning("signed webhook to %s not reached: %s", self.host, type(exc).__name__)
            return False
        if not 200 <= response.status_code < 300:
            redirect = " (redirects are not followed)" if 300 <= response.status_code < 400 else ""
            self.logger.warning("signed webhook answered HTTP %s%s", response.status_code, redirect)
            return False
        return True


N_MGR.add(NotifySignedJSON)


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
    # services one after another (one channel per send), nothing written to disk, and no HTTP redirect
    # followed: a public receiver must not bounce a notification past the guard to an internal address
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


def mail_parties(plugin) -> dict[str, list[str]]:
    """Whom a mailto:// URL addresses, as Apprise parsed it: to (`?to=`, else the URL's address), cc, bcc."""
    return {"to": [address for _name, address in getattr(plugin, "targets", []) if address],
            "cc": sorted(getattr(plugin, "cc", ()) or ()), "bcc": sorted(getattr(plugin, "bcc", ()) or ())}


def send_django_mail(*, subject: str, body: str, parties: list[dict[str, list[str]]]) -> None:
    """One message through Django's EMAIL_BACKEND to everyone the mailto:// channels in `parties` address."""
    def merged(key: str) -> list[str]:
        return list(dict.fromkeys(address for party in parties for address in party[key]))
    EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, merged("to"), cc=merged("cc"), bcc=merged("bcc")).send(
        fail_silently=False)


def mask_url(url: str) -> str:
    """`url` with its secrets masked, for pages, the admin, the audit log and logs.

    Apprise's privacy view (passwords and tokens), and on top of it the values of a URL's custom headers
    (`+Authorization=...`), query arguments (`-apikey=...`) and payload entries (`:token=...`), which
    Apprise shows as they are.
    """
    plugin = instantiate(url)
    if plugin is None:
        return _shown_raw(url)
    shown = plugin.url(privacy=True)
    parts = urllib.parse.urlsplit(shown)
    query = [(k, "****" if k[:1] in "+-:" and v else v)
             for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k not in _NOISE]
    path = "" if parts.path == "/" and not query else parts.path
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode(query, safe="+-:*"),
                                    parts.fragment))


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
    elif "{host}" in " ".join(getattr(type(plugin), "templates", ())):
        host, port = getattr(plugin, "host", "") or "", getattr(plugin, "port", None)
    else:
        return  # a cloud service's fixed address (slack, telegram, ntfy.sh, ...)
    host = host.strip("[]")  # Apprise keeps an IPv6 literal's brackets
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

def send_channel(url: str, *, title: str, body: str, payload: dict, secret: str = "",
                 field: str = "channel") -> None:
    """Send one notification to `url` through the guard and Apprise; raises RuntimeError/ServiceError on failure.

    The guard runs here, after name resolution, right before sending: a name may have come to point inside
    since the URL was saved. Apprise's dispatcher sends (with the URL's retries: ?retry=N, and a signed
    webhook's WEBHOOK_ATTEMPTS).
    """
    plugin = parse_channel(url, field=field)
    if uses_django_mail(url, plugin):
        guard(url, field=field, resolve=True, plugin=plugin)
        send_django_mail(subject=title, body=body, parties=[mail_parties(plugin)])
        return
    if isinstance(plugin, NotifySignedJSON):
        plugin.etl_payload, plugin.etl_secret = payload, secret
    dispatcher = apprise.Apprise(asset=_asset())
    dispatcher.add(plugin)
    # the guard's resolution pins each host for the send: every later hop and connection is checked
    # against the same addresses (no DNS rebinding between the check and the connection)
    with outgoing_guard():
        guard(url, field=field, resolve=True, plugin=plugin)
        result = dispatcher.notify(body=body, title=title, notify_type=apprise.NotifyType.FAILURE)
    if not result:
        # Apprise's own account of the attempts (its result keeps each service's log lines)
        lines = [entry.message for service in getattr(result, "results", [])
                 for entry in service.logs() if entry.level in ("WARNING", "ERROR", "CRITICAL")]
        reason = "; ".join(dict.fromkeys(lines[-3:])) or "Apprise reported a failure"
        raise RuntimeError(mask_text(f"{mask_url(url)}: {reason}", [url])[:500])


def unmask_channels(new: list[str], old: list[str]) -> list[str]:
    """`new` with every URL that is the masked form of one of `old` replaced by that stored URL.

    Pages, forms and the schedules file show channels masked; saving what was shown keeps the secrets.
    """
    masked = {mask_url(url): url for url in old}
    return [masked.get(url, url) for url in new]
