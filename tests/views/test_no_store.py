"""Pages for signed-in users are never stored by a cache; anonymous answers are left alone."""
from __future__ import annotations

from django.urls import reverse


def test_a_signed_in_page_is_no_store(viewer_client):
    response = viewer_client.get(reverse("scheduler:runs"))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_an_anonymous_redirect_to_the_login_page_keeps_its_own_headers(client, db):
    response = client.get(reverse("scheduler:runs"))
    assert response.status_code == 302 and "no-store" not in response.get("Cache-Control", "")
