"""The admin group manages users and groups on the Django admin's own pages (issue 23, point 9)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def test_the_admin_group_opens_the_user_and_group_pages(admin_client):
    for url in ("/admin/", "/admin/auth/user/", "/admin/auth/user/add/", "/admin/auth/group/",
                "/admin/auth/group/add/"):
        assert admin_client.get(url).status_code == 200, url
    assert 'href="/admin/auth/user/"' in admin_client.get("/admin/").content.decode()


def test_the_admin_group_adds_a_user_and_puts_it_in_the_operator_group(admin_client):
    response = admin_client.post("/admin/auth/user/add/", {"username": "newbie", "password1": "a-Long-pw-9921!",
                                                           "password2": "a-Long-pw-9921!", "usable_password": "true"})
    assert response.status_code == 302, response.content.decode()[:2000]
    user = User.objects.get(username="newbie")
    operator = Group.objects.get(name="operator")
    data = {"username": "newbie", "is_active": "on", "groups": [operator.pk], "date_joined_0": "2026-12-04",
            "date_joined_1": "12:00:00", "initial-date_joined_0": "2026-12-04", "initial-date_joined_1": "12:00:00"}
    response = admin_client.post(f"/admin/auth/user/{user.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]


def test_a_non_superuser_admin_cannot_make_a_superuser_or_touch_one(admin_client, make_user):
    target = make_user("plain")
    page = admin_client.get(f"/admin/auth/user/{target.pk}/change/").content.decode()
    assert 'name="is_superuser"' not in page and 'name="user_permissions"' not in page
    root = make_user("root", is_staff=True, is_superuser=True)
    assert admin_client.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"}).status_code == 403
    assert User.objects.filter(username="root").exists()
    page = admin_client.get(f"/admin/auth/user/{root.pk}/change/").content.decode()
    assert 'name="password"' not in page and 'name="username"' not in page  # shown read-only


def test_an_operator_still_has_no_user_pages(client, operator):
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    assert client.get("/admin/auth/user/").status_code == 403
