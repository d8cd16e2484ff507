"""Request bodies under /api/v1/: JSON only, read with a message that says what is wrong.

ninja's parser is its documented hook for reading bodies; ninja wraps whatever it raises in
`HttpError(400, "Cannot parse request body")` (raised `from` ours), and `errors.on_http_error` turns the cause
back into a problem that names it: 415 for a body that is not declared JSON, 400 for one that cannot be read.
"""
from __future__ import annotations

import json
import sys

from ninja.parser import Parser

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json

JSON = "application/json"


class UnsupportedMediaType(Exception):
    """The body is declared as something other than JSON (a form, text, XML ...)."""

    def __init__(self, media_type: str) -> None:
        self.media_type = media_type
        super().__init__(f"the request body must be {JSON}, got {media_type or 'no Content-Type'}")


class BodyUnreadable(Exception):
    """The body is declared JSON but cannot be read as JSON."""


def is_json(media_type: str) -> bool:
    """application/json, or a structured `+json` type such as application/merge-patch+json (RFC 6839)."""
    media_type = media_type.strip().lower()
    return media_type == JSON or (media_type.startswith("application/") and media_type.endswith("+json"))


def _why(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return "not valid JSON (it is not UTF-8 text)"
    if "integer string conversion" in str(exc):
        # Python refuses to read integers longer than its limit (a guard against a CPU-bound denial of service)
        return f"a number in it has more than {sys.get_int_max_str_digits()} digits"
    return "not valid JSON"


class JsonParser(Parser):
    def parse_body(self, request):
        if not is_json(request.content_type or ""):
            raise UnsupportedMediaType(request.content_type or "")
        try:
            return parse_json(request.body, field="body")
        except ConfigError:  # an oversized or non-finite number, named where it is (errors.on_http_error)
            raise
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer over the digit limit
            raise BodyUnreadable(_why(exc)) from exc
        except RecursionError:
            raise BodyUnreadable("not read: its arrays or objects are nested too deeply") from None
