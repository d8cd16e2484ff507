"""The favicon is served, not a 404 (issue 23, point 10)."""
from __future__ import annotations

from django.contrib.staticfiles import finders
from django.templatetags.static import static


def test_favicon_ico_points_at_the_static_icon(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == static("scheduler/favicon.svg")
    assert finders.find("scheduler/favicon.svg")


def test_every_page_names_its_icon(client, db):
    page = client.get("/accounts/login/").content.decode()
    assert f'<link rel="icon" href="{static("scheduler/favicon.svg")}" type="image/svg+xml">' in page
