"""Static files (issue 37): after collectstatic, pages name hashed copies that WhiteNoise sends gzipped and cacheable
for ever; before it (a web server started without `serve`), the plain names, served from the apps' directories."""
from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

LOGIN = reverse("login")


def _asset(page: str, name: str) -> str:
    return re.search(rf'"(/static/scheduler/{name}[^"]*)"', page).group(1)


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = tmp_path_factory.mktemp("static")
    from django.test import override_settings

    with override_settings(STATIC_ROOT=str(root)):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


def test_collected_pages_name_hashed_files_sent_gzipped_and_cached_for_ever(db, settings, collected):
    settings.STATIC_ROOT = str(collected)
    client = Client()  # a new handler: WhiteNoise reads the collected files when it starts
    page = client.get(LOGIN).content.decode()
    for name in ("app.css", "app.js"):
        stem, ext = name.rsplit(".", 1)
        found = re.search(rf'"(/static/scheduler/{stem}\.[0-9a-f]{{12}}\.{ext})"', page)
        assert found, f"no hashed {name} in the page"
        url = found.group(1)
        response = client.get(url, headers={"Accept-Encoding": "gzip, br"})
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip", url
        assert "immutable" in response["Cache-Control"] and "max-age=315360000" in response["Cache-Control"]
        plain = client.get(url)
        assert len(_body(response)) * 2 < len(_body(plain))
    htmx = re.search(r'<script src="(/static/django_htmx/[^"]+)"', page).group(1)
    response = client.get(htmx, headers={"Accept-Encoding": "gzip"})
    assert re.search(r"\.[0-9a-f]{12}\.js$", htmx) and response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]


def test_without_collectstatic_pages_name_the_plain_files_which_are_still_served(db, settings, tmp_path):
    settings.STATIC_ROOT = str(tmp_path / "empty")
    client = Client()
    page = client.get(LOGIN).content.decode()
    url = _asset(page, "app.css")
    assert url == "/static/scheduler/app.css"
    response = client.get(url)
    assert response.status_code == 200 and b"--accent" in _body(response)
