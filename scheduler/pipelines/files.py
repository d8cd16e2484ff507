"""CSV and JSON-lines files as a source, CSV files as a sink."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from scheduler.core import ConfigError, EtlError, LineageDataset, Window, file_dataset, stop

from .values import coerce_like, sql_text_value, window_bounds

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _check_path(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise ConfigError("path", "must be a file path")
    return Path(path)


class FileSource:
    """Records of a CSV (dicts of text) or JSON-lines file, optionally inside a window.

    Window filtering compares parsed values: with integer bounds the column
    is read as an integer, with datetime bounds as an ISO-8601 datetime
    (naive text taken as UTC). Records without a value are outside every
    window; a value that does not parse is an error naming the line.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        format: str | None = None,
        watermark_column: str | None = None,
        window: Any = None,
    ) -> None:
        self.path = _check_path(path)
        if format is None:
            format = FORMATS.get(self.path.suffix.lower())
            if format is None:
                raise ConfigError("format", f"cannot tell the format of {self.path.name!r}; pass csv or jsonl")
        if format not in ("csv", "jsonl"):
            raise ConfigError("format", f"must be 'csv' or 'jsonl', got {format!r}")
        self.format = format
        self.low, self.high = window_bounds(window)
        self.window = window
        self._window = Window(self.low, self.high)
        if window is not None and not watermark_column:
            raise ConfigError("watermark_column", "a window needs the column to filter on")
        self.watermark_column = watermark_column

    def __repr__(self) -> str:
        return f"FileSource({str(self.path)!r}, format={self.format!r})"

    def lineage_inputs(self) -> list[LineageDataset]:
        return [file_dataset(self.path)]

    def _open(self) -> Any:
        try:
            return open(self.path, newline="", encoding="utf-8")
        except OSError as exc:
            raise EtlError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def _records(self) -> Iterator[tuple[int, dict]]:
        with self._open() as handle:
            if self.format == "csv":
                reader = csv.DictReader(handle)
                for record in reader:
                    yield reader.line_num, record
                return
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise EtlError(f"{self.path}:{number}: not JSON ({exc.msg})") from exc
                if not isinstance(record, dict):
                    raise EtlError(f"{self.path}:{number}: expected a JSON object per line")
                yield number, record

    def _inside(self, number: int, record: dict) -> bool:
        value = record.get(self.watermark_column)  # type: ignore[arg-type]
        if value is None or value == "":
            return False
        like = self.low if self.low is not None else self.high
        try:
            value = coerce_like(value, like)
        except (ValueError, TypeError) as exc:
            raise EtlError(f"{self.path}:{number}: {self.watermark_column} {exc}") from exc
        return self._window.contains(value)

    def extract(self) -> Iterator[dict]:
        for number, record in self._records():
            if number % 1000 == 0:
                stop.check()  # between batches of lines: a stopped run reads no further
            if self.window is None or self._inside(number, record):
                yield record


class CsvSink:
    """Writes rows to a CSV file; the header is written once.

    `append=True` adds to the file (its existing header fixes the columns);
    `append=False` replaces the file on each load, atomically, so a reader
    never sees half a report.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        columns: Sequence[str] | None = None,
        append: bool = True,
    ) -> None:
        self.path = _check_path(path)
        if columns is not None:
            if isinstance(columns, str) or not columns or not all(isinstance(c, str) and c for c in columns):
                raise ConfigError("columns", "must be a non-empty list of column names")
            if len(set(columns)) != len(columns):
                raise ConfigError("columns", "names must not repeat")
        self.columns = list(columns) if columns is not None else None
        self.append = bool(append)

    def __repr__(self) -> str:
        return f"CsvSink({str(self.path)!r})"

    def lineage_outputs(self) -> list[LineageDataset]:
        return [file_dataset(self.path)]

    def _existing_header(self) -> list[str] | None:
        try:
            with open(self.path, newline="", encoding="utf-8") as handle:
                return next(csv.reader(handle), None)
        except FileNotFoundError:
            return None

    def load(self, rows: list[dict]) -> int:
        rows = list(rows)
        header = self._existing_header() if self.append else None
        columns = header or self.columns
        if columns is None:
            if not rows:
                return 0
            columns = list(dict.fromkeys(k for row in rows for k in row))
        unknown = sorted({k for row in rows for k in row} - set(columns))
        if unknown:
            raise EtlError(f"{self!r}: columns {', '.join(unknown)} are not in the file's header")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.append:
            with open(self.path, "a", newline="", encoding="utf-8") as handle:
                self._write(handle, columns, rows, header=header is None)
        else:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
                    self._write(handle, columns, rows, header=True)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        return len(rows)

    @staticmethod
    def _write(handle: Any, columns: list[str], rows: list[dict], *, header: bool) -> None:
        writer = csv.DictWriter(handle, fieldnames=columns)
        if header:
            writer.writeheader()
        for index, row in enumerate(rows):
            if index % 1000 == 999:
                stop.check()  # a stopped run's file is not replaced (the temporary file is removed)
            writer.writerow({k: sql_text_value(v) for k, v in row.items()})
