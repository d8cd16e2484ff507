"""Alerts: the global channels, how they are delivered, and which networks outgoing requests may reach
(docs/notifications.md).

Part of the settings (etlsite/settings.py imports every name of `__all__`), kept apart for the reader who looks
for these alone.
"""
from __future__ import annotations

import re

from etlsite.env import envbool, envfloat, envint, envlist, envstr

__all__ = [
    "ETL_ALERTS_SYNC",
    "ETL_ALERT_ALLOW_LOCAL_CHANNELS",
    "ETL_ALERT_ALLOW_PRIVATE_URLS",
    "ETL_ALERT_EMAILS",
    "ETL_ALERT_INTERVAL",
    "ETL_ALERT_URLS",
    "ETL_ALERT_WEBHOOK_SECRET",
    "ETL_ALERT_WEBHOOK_URL",
    "ETL_ALERT_WORKERS",
    "ETL_OUTGOING_ALLOWED_NETWORKS",
]

# Global alert channels (the fallback for teams without channels): Apprise URLs separated by spaces, new lines or
# commas (a comma inside a URL, as in ?to=a@x.com,b@x.com, stays). The three old settings still work and are mapped
# onto it: each ETL_ALERT_EMAILS address -> mailto://ADDRESS, ETL_ALERT_WEBHOOK_URL https://h/p -> etlhooks://h/p
# signed with ETL_ALERT_WEBHOOK_SECRET (docs/notifications.md).
ETL_ALERT_URLS = [u for u in re.split(r"\s+|,(?=\s*[A-Za-z0-9]+://)", envstr("ETL_ALERT_URLS", "")) if u.strip()]
ETL_ALERT_EMAILS = envlist("ETL_ALERT_EMAILS", [])
ETL_ALERT_WEBHOOK_URL = envstr("ETL_ALERT_WEBHOOK_URL", "")
ETL_ALERT_WEBHOOK_SECRET = envstr("ETL_ALERT_WEBHOOK_SECRET", "")
ETL_ALERTS_SYNC = envbool("ETL_ALERTS_SYNC", False)  # deliver alerts inline (tests)
# Alerts are delivered from their table by each cluster's `alerts` loop, through a pool of this many threads.
ETL_ALERT_WORKERS = envint("ETL_ALERT_WORKERS", 2, minimum=1)
ETL_ALERT_INTERVAL = envfloat("ETL_ALERT_INTERVAL", 1.0, minimum=0.05)
# Alert webhooks into loopback, link-local (169.254.x) or private ranges are refused unless this is set.
ETL_ALERT_ALLOW_PRIVATE_URLS = envbool("ETL_ALERT_ALLOW_PRIVATE_URLS", False)
ETL_ALERT_ALLOW_LOCAL_CHANNELS = envbool("ETL_ALERT_ALLOW_LOCAL_CHANNELS", False)  # syslog://, dbus://, keyfile= ...
# Networks outgoing requests (alert channels, the HTTP source) may reach although they are not global, as CIDRs
# separated by commas: "10.20.0.0/16,fd00:1::/64" (docs/security.md).
ETL_OUTGOING_ALLOWED_NETWORKS = envlist("ETL_OUTGOING_ALLOWED_NETWORKS", [])
