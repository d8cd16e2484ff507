"""gunicorn workers whose own refusals of a request under /api/v1/ are problem+json, as every other API error is.

gunicorn refuses an over-long request line (414), an over-long or excessive header (431) and a malformed request
head (400) itself, before Django sees the request, and answers HTML. `manage.py serve` runs these workers (gevent
or gthread, as ETL_WEB_WORKER_CLASS says): each request keeps the first bytes of its head, where the request
target is, and when gunicorn refuses a request whose target is under /api/v1/ the worker answers the same status
as `application/problem+json` (RFC 9457, the body `scheduler/api/errors.py` gives). Other paths keep gunicorn's
answer. gunicorn's limits themselves are unchanged (serve's --limit-request-* options).

No Django import here: a refusal can come before the application has loaded.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from urllib.parse import urlsplit

from gunicorn import util
from gunicorn.http import errors
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.workers.ggevent import GeventWorker as _GeventWorker
from gunicorn.workers.gthread import ThreadWorker as _ThreadWorker

API_PREFIX = "/api/v1/"  # scheduler.api.errors.PREFIX (a test checks they agree)
TYPE_BASE = "/docs/api.md#"  # scheduler.api.errors.TYPE_BASE
HEAD_BYTES = 256  # of a request head kept for this: the method and the start of the target

STATUS = {errors.LimitRequestLine: 414, errors.LimitRequestHeaders: 431}
BAD_REQUEST = (
    errors.InvalidRequestLine,
    errors.InvalidRequestMethod,
    errors.InvalidHTTPVersion,
    errors.InvalidHeader,
    errors.InvalidHeaderName,
    errors.ObsoleteFolding,
    errors.InvalidSchemeHeaders,
    errors.InvalidChunkSize,
    errors.ChunkMissingTerminator,
    errors.InvalidChunkExtension,
)
DETAIL = {
    414: "the request line is longer than the server reads ({limit} bytes): send long input in a JSON body",
    431: "a request header is longer than the server reads ({limit} bytes), or there are more than {fields} of them",
    400: "the request head cannot be read ({error})",
}


class HeadKeepingRequest(Request):
    """gunicorn's request, which keeps the first bytes of its head on any error raised while reading the head."""

    def read_into(self, unreader, buf, stop=False):
        if "_etl_head" not in self.__dict__:
            self._etl_head = buf  # the head's first buffer, grown in place while the request line is read
        return super().read_into(unreader, buf, stop)

    def parse(self, unreader):
        try:
            return super().parse(unreader)
        except errors.ParseException as exc:
            exc.etl_head = bytes(self.__dict__.get("_etl_head", b"")[:HEAD_BYTES])
            raise


# gunicorn's workers build their parser through gunicorn.http.get_parser, which takes RequestParser's message
# class: set here, in the processes that load these workers
RequestParser.mesg_class = HeadKeepingRequest


def api_target(head: bytes) -> bool:
    """Whether a request head's target (origin or absolute form) is under /api/v1/."""
    line = head.lstrip(b"\r\n").split(b"\r\n", 1)[0]
    parts = line.split(b" ", 2)
    if len(parts) < 2:
        return False
    target = parts[1].decode("latin-1")
    if "://" in target[:12]:
        target = urlsplit(target).path
    return target.startswith(API_PREFIX) or target == API_PREFIX.rstrip("/")


def problem_status(exc: BaseException) -> int | None:
    """The status gunicorn answers `exc` with, for the refusals this module answers as problem+json."""
    for kind, status in STATUS.items():
        if isinstance(exc, kind):
            return status
    return 400 if isinstance(exc, BAD_REQUEST) else None


def problem_bytes(status: int, detail: str) -> bytes:
    """A whole HTTP response: the status and a problem+json body (the connection is closed after it)."""
    phrase = HTTPStatus(status).phrase
    kind = phrase.lower().replace(" ", "-").replace("'", "")  # as scheduler.api.errors.problem names it
    body = json.dumps({"type": TYPE_BASE + kind, "title": phrase, "status": status, "detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nConnection: close\r\nContent-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ProblemErrors:
    """handle_error: gunicorn's own refusal of an /api/v1/ request as problem+json; anything else as gunicorn does."""

    def handle_error(self, req, client, addr, exc):
        status = problem_status(exc)
        if (
            req is not None
            or status is None
            or isinstance(exc, errors.InvalidResponseHeader)
            or not api_target(getattr(exc, "etl_head", b""))
        ):
            return super().handle_error(req, client, addr, exc)
        detail = DETAIL[status].format(
            limit=self.cfg.limit_request_line if status == 414 else self.cfg.limit_request_field_size,
            fields=self.cfg.limit_request_fields,
            error=type(exc).__name__,
        )
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            util.write_nonblock(client, problem_bytes(status, detail))
        except Exception:  # the client went away: nothing to answer  # noqa: BLE001
            self.log.debug("Failed to send error message.")
        return None


class GeventWorker(ProblemErrors, _GeventWorker):
    QUIT_GRACE = 1  # seconds a quick quit (Ctrl-C) leaves the requests in flight, then their handlers are ended

    def handle_quit(self, sig, frame):
        """A quick quit (SIGINT from the terminal's Ctrl-C, SIGQUIT from the master) without a traceback.

        gunicorn's gevent worker quits by `sys.exit(0)` in a greenlet it spawns, which gevent reports as "failed
        with SystemExit" with a traceback from every worker at every Ctrl-C of `make run` (gunicorn #3239, closed
        as expected behaviour). Ending the worker's serving loop instead stops it the way a graceful stop does,
        with `QUIT_GRACE` seconds for the requests in flight instead of --graceful-timeout."""
        self.cfg.set("graceful_timeout", self.QUIT_GRACE)  # this worker's own copy of the settings
        self.alive = False
        self.cfg.worker_int(self)


class ThreadWorker(ProblemErrors, _ThreadWorker):
    pass
