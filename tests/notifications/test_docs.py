"""The copy-paste channel URLs of docs/notifications.md are ones Apprise accepts (and the guard lets through)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduler.services.integrations.channels import check_channels, mask_url

DOC = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"


def _examples() -> list[str]:
    block = re.search(r"```text\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_doc_has_an_example_for_each_kind():
    schemes = {url.split("://")[0] for url in _examples()}
    assert {"mailto", "mailtos", "slack", "workflows", "ntfy", "ntfys", "jsons", "etlhooks"} <= schemes


@pytest.mark.parametrize("url", _examples())
def test_every_example_is_accepted_and_shown_masked(url, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    assert check_channels(url, field="alert_channels") == [url]
    for secret in ("app-password", "TIiajkdnlazkcOXrIdevi7FQ", "tk_abcdef0123456789",
                   "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg"):
        assert secret not in mask_url(url)
