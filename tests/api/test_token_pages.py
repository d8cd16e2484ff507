"""The dashboard's API tokens page (a section linked from Preferences) and the admin."""
import re

from django.test import Client

from scheduler.models import ApiToken
from scheduler.services.access.tokens import token_authenticate, token_create


def test_preferences_links_to_the_tokens_page(client, operator):
    client.force_login(operator)
    assert "/preferences/tokens/" in client.get("/preferences/").content.decode()


def test_login_is_required(client, db):
    response = client.get("/preferences/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_create_shows_the_token_once(client, operator):
    client.force_login(operator)
    response = client.post("/preferences/tokens/", {"name": "ci", "expires": "7d"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html  # the partial for htmx
    token = re.search(r"(etl_[a-z0-9]+_[A-Za-z0-9_-]+)", html).group(1)
    assert token_authenticate(token).user == operator
    again = client.get("/preferences/tokens/").content.decode()
    assert token not in again and token.split("_")[1] in again


def test_bad_input_is_shown_and_nothing_created(client, operator):
    client.force_login(operator)
    response = client.post("/preferences/tokens/", {"name": "ci", "expires": "tomorrow"})
    assert response.status_code == 400 and "30d" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_revoke_own_token_but_not_anothers(client, operator, make_user):
    other = make_user("mallory", "viewer")
    mine = token_create(user=operator, name="mine", actor="tests").token
    theirs = token_create(user=other, name="theirs", actor="tests").token
    client.force_login(operator)
    assert client.post(f"/preferences/tokens/{mine.key_id}/revoke").status_code == 200
    assert client.post(f"/preferences/tokens/{theirs.key_id}/revoke").status_code == 404
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.revoked_at is not None and theirs.revoked_at is None


def test_revoke_needs_csrf(operator):
    token = token_create(user=operator, name="mine", actor="tests").token
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert strict.post(f"/preferences/tokens/{token.key_id}/revoke").status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None


def test_staff_revoke_in_the_admin_and_the_hash_is_read_only(client, operator, make_user):
    boss = make_user("root", is_staff=True, is_superuser=True)
    token = token_create(user=operator, name="ci", actor="tests").token
    client.force_login(boss)
    page = client.get(f"/admin/scheduler/apitoken/{token.pk}/change/").content.decode()
    assert token.secret_hash in page and 'name="secret_hash"' not in page
    client.post("/admin/scheduler/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked_at is not None
