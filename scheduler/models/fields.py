"""Model fields that mask secrets as they are written (scheduler/core/masking.py).

The masking sits in `get_prep_value`, which every write path goes through:
`save`, `bulk_create`, `QuerySet.update` and the services' own bulk
statements (services/bulk.py prepares each value by its field). So no writer
of a run's error, a log line or an audit entry can forget it.

Each deconstructs as the Django field it extends: the column is the same, so
migrations see no change (and SQLite rebuilds no table of millions of rows).
"""
from __future__ import annotations

from typing import Any

from django.db import models

from scheduler.core.masking import masker


class _Plain:
    """Deconstruct as the plain Django field (the migrations' view: masking is not in the schema)."""

    plain = ""

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, self.plain, args, kwargs


class MaskedCharField(_Plain, models.CharField):
    """A CharField whose text is masked when written (a mask is never longer than what it replaces)."""

    plain = "django.db.models.CharField"

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(masker.mask(value) if isinstance(value, str) else value)


class MaskedTextField(_Plain, models.TextField):
    """A TextField whose text is masked when written."""

    plain = "django.db.models.TextField"

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(masker.mask(value) if isinstance(value, str) else value)


class MaskedJSONField(_Plain, models.JSONField):
    """A JSONField whose strings (keys and values, at any depth) are masked when written."""

    plain = "django.db.models.JSONField"

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, (str, dict, list, tuple)):
            value = masker.mask_data(value)
        return super().get_prep_value(value)
