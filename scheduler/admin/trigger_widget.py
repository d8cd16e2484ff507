"""The schedule form's trigger_config field with the next fires under it, asked as the trigger's fields change
(htmx, views/trigger_preview.py): a cron expression is checked and seen before it is saved (issue 37)."""
from __future__ import annotations

from django import forms
from django.urls import reverse
from django.utils.html import format_html

# the admin's ids of the fields the preview reads
PREVIEW_FIELDS = "#id_trigger_kind, #id_trigger_config, #id_timezone"
PREVIEW_TRIGGER = ("load, input changed delay:400ms from:#id_trigger_config, "
                   "input changed delay:400ms from:#id_trigger_kind, input changed delay:400ms from:#id_timezone, "
                   "change from:#id_trigger_kind, change from:#id_timezone")


class TriggerConfigWidget(forms.Textarea):
    """A textarea, then the box the preview of its next fires goes into."""

    class Media:
        js = ("django_htmx/htmx-2.min.js",)

    def render(self, name, value, attrs=None, renderer=None):
        area = super().render(name, value, attrs, renderer)
        box = format_html(
            '<div id="trigger-preview" class="trigger-preview" aria-live="polite" hx-get="{}" hx-trigger="{}" '
            'hx-include="{}"><p class="help">The next fires show here as you edit the trigger '
            "(with JavaScript; without it, when the schedule is saved).</p></div>",
            reverse("scheduler:trigger_preview"), PREVIEW_TRIGGER, PREVIEW_FIELDS)
        return area + box
