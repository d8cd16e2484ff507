"""What the run page shows as evidence, each piece once (issue 37): the error's summary line above its folded
traceback, and the log line that repeats that traceback folded to a pointer to it."""

from __future__ import annotations

TRACEBACK_HEAD = "Traceback (most recent call last):"


def _lines(text: str) -> list[str]:
    return [line for line in (text or "").splitlines() if line.strip()]


def error_parts(error: str) -> dict:
    """{"summary": one line a person reads first, "detail": the whole text, or "" when the line says it all}.

    A Python traceback is summed up by its last line (the exception); other errors (a command's or dbt's words,
    then their last lines) by their first."""
    lines = _lines(error)
    if not lines:
        return {"summary": "", "detail": ""}
    summary = lines[-1] if lines[0].startswith(TRACEBACK_HEAD) else lines[0]
    return {"summary": summary.strip(), "detail": error.strip() if len(lines) > 1 else ""}


def fold_repeated_traceback(lines: list, error: str) -> int | None:
    """The seq of the ERROR log line that repeats the run's stored traceback (the worker logs it and stores it), or
    None. The page shows that line folded: the traceback is read once, under Error."""
    tail = _lines(error)
    if not tail or not tail[0].startswith(TRACEBACK_HEAD):
        return None
    for line in lines:
        if line.level == "ERROR" and line.message.startswith(TRACEBACK_HEAD):
            logged = _lines(line.message)
            if logged and logged[-1].strip() == tail[-1].strip():
                return line.seq
    return None
