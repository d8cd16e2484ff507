"""What the template language does not say itself: a `{# ... #}` comment ends on its own line.

Django reads `{#` without a `#}` on the same line as text, so a comment wrapped over two lines was printed on the run
page for every user (found by trying the demo as its operator)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TEMPLATES = sorted((ROOT / "templates").rglob("*.html")) + sorted((ROOT / "scheduler").rglob("templates/**/*.html"))
OPEN_ONLY = re.compile(r"\{#(?!.*#\})")


def wrapped_comments(text: str) -> list[int]:
    """The lines (1-based) where a `{#` comment opens and does not close."""
    return [n for n, line in enumerate(text.splitlines(), 1) if OPEN_ONLY.search(line)]


def test_the_check_finds_a_wrapped_comment_and_passes_one_line_and_block_comments():
    assert wrapped_comments("{# the actions,\n   a bar #}\n<p>") == [1]
    assert wrapped_comments("{# one line #}<p>{# another #}\n{% comment %}two\nlines{% endcomment %}") == []


def test_no_template_wraps_a_one_line_comment():
    assert len(TEMPLATES) > 20
    found = {str(path.relative_to(ROOT)): lines for path in TEMPLATES if (lines := wrapped_comments(path.read_text()))}
    assert found == {}, f"use {{% comment %}} ... {{% endcomment %}} for a comment over several lines: {found}"


def test_the_run_page_prints_no_template_syntax(client, make_schedule, make_run, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="x"))
    run = make_run(make_schedule("orders"))
    body = client.get(f"/runs/{run.pk}/").content.decode()
    assert "{#" not in body and "#}" not in body and "{%" not in body
