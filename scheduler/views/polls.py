"""A live part's poll sends only what changed: 304 and no body when the poller's copy is still current (issue 37).

The ETag is a digest of the fragment as rendered, leaving out what changes on every answer without the facts
changing: the CSRF token (masked afresh each time, any copy stays valid) and ages the page counts on by itself
(`<span data-age="6.4">`, app.js). static/scheduler/app.js sends the last ETag back as If-None-Match and keeps
the part as it is on a 304.
"""
from __future__ import annotations

import hashlib
import re

from django.utils.cache import get_conditional_response

# what differs between two answers that show the same facts
_VOLATILE = (
    re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*'),
    re.compile(r'(data-age=")[^"]*("[^>]*>)[^<]*'),
)


def fragment_etag(html: str) -> str:
    for pattern in _VOLATILE:
        html = pattern.sub(lambda m: "".join(g for g in m.groups()), html)
    return '"' + hashlib.blake2b(html.encode(), digest_size=12).hexdigest() + '"'


def poll_answer(request, response):
    """The answer to a poll (an htmx GET) with its ETag; a 304 without a body when If-None-Match names it."""
    if not request.htmx or request.method != "GET" or response.status_code != 200 or response.streaming:
        return response
    etag = fragment_etag(response.content.decode())
    response["ETag"] = etag
    return get_conditional_response(request, etag=etag, response=response)
