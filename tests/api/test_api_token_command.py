"""`manage.py api_token create|list|revoke --user NAME`."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import ApiToken, AuditEntry
from scheduler.services.access.tokens import token_authenticate


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_prints_the_token_once_and_it_works(operator):
    out, err = run("create", "--user", "olivia", "--name", "ci", "--expires", "30d")
    token = out.strip()
    assert token.startswith("etl_") and "not shown again" in err
    found = token_authenticate(token)
    assert found.user == operator and found.expires_at is not None
    assert token not in json.dumps(list(ApiToken.objects.values()), default=str)
    assert AuditEntry.objects.filter(action="token.create").exists()


def test_list_shows_no_secret_and_revoke_ends_it(operator):
    token = run("create", "--user", "olivia", "--name", "ci")[0].strip()
    key_id = token.split("_")[1]
    rows = json.loads(run("list", "--user", "olivia", "--json")[0])
    assert [(r["key_id"], r["state"]) for r in rows] == [(key_id, "active")]
    assert token.split("_", 2)[2] not in json.dumps(rows)
    assert "revoked" in run("revoke", "--user", "olivia", "--key-id", key_id)[0]
    assert json.loads(run("list", "--user", "olivia", "--json")[0])[0]["state"] == "revoked"
    assert "already revoked" in run("revoke", "--user", "olivia", "--key-id", key_id)[0]


@pytest.mark.parametrize("args, flag", [
    (["create", "--user", "nobody", "--name", "x"], "--user"),
    (["create", "--user", "olivia", "--name", "  "], "--name"),
    (["create", "--user", "olivia", "--name", "x", "--expires", "soon"], "--expires"),
    (["create", "--user", "olivia", "--name", "x", "--expires", "0d"], "--expires"),
    (["create", "--user", "olivia", "--name", "x" * 101], "--name"),
    (["revoke", "--user", "olivia", "--key-id", "nope"], "--key-id"),
])
def test_bad_input_names_the_flag_and_changes_nothing(operator, args, flag):
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert str(caught.value).startswith(flag + ":")
    assert not ApiToken.objects.exists()


def test_another_users_token_cannot_be_revoked_through_your_name(operator, make_user):
    make_user("mallory", "viewer")
    token = run("create", "--user", "olivia", "--name", "ci")[0].strip()
    with pytest.raises(CommandError):
        run("revoke", "--user", "mallory", "--key-id", token.split("_")[1])
    assert ApiToken.objects.get().revoked_at is None
