"""Login throttling (django-axes): wrong passwords lock the sign-in; admins see and clear the lock-out."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"


def _login(client, username, password, ip="198.51.100.7"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_wrong_passwords_lock_the_account_even_for_the_right_password(client, operator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "olivia", "wrong").status_code == 200  # the form again, with its error
    assert _login(client, "olivia", "wrong").status_code == 429  # the limit-th failure locks
    locked = _login(client, "olivia", "pw-olivia-x9!")
    assert locked.status_code == 429 and "Sign-in locked" in locked.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_right_password_before_the_limit_signs_in_and_clears_the_count(client, operator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "olivia", "wrong")
    assert _login(client, "olivia", "pw-olivia-x9!").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "olivia", "wrong")
    assert _login(client, "olivia", "pw-olivia-x9!").status_code == 302, "the count started again after the success"


def test_another_address_is_not_locked_out_with_the_attacker(client, operator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "olivia", "wrong", ip="203.0.113.66")
    assert _login(client, "olivia", "pw-olivia-x9!", ip="198.51.100.7").status_code == 302


def test_an_admin_sees_the_lock_out_and_can_clear_it(client, operator, settings):
    from axes.models import AccessAttempt

    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "olivia", "wrong")
    admin = User.objects.create_superuser("root", "root@example.com", "pw-root-x9!")
    client.force_login(admin)
    page = client.get(reverse("admin:axes_accessattempt_changelist"))
    assert page.status_code == 200 and "olivia" in page.content.decode()
    AccessAttempt.objects.filter(username="olivia").delete()  # what the admin's delete action does
    client.logout()
    assert _login(client, "olivia", "pw-olivia-x9!").status_code == 302
