"""The schema and the interactive docs: public, local assets only, no inline script (our CSP)."""
import re

from django.contrib.staticfiles import finders


def test_the_schema_is_openapi_3_1_with_problem_responses(client, db):
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.1") and schema["info"]["version"] == "1"
    trigger = schema["paths"]["/api/v1/schedules/{name}/runs"]["post"]
    assert "201" in trigger["responses"]
    assert "application/problem+json" in trigger["responses"]["403"]["content"]
    assert {"TokenAuth", "SessionAuth"} <= set(schema["components"]["securitySchemes"])


def test_the_docs_page_uses_only_our_static_files(client, db):
    response = client.get("/api/v1/docs")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Content-Security-Policy" in response.headers
    sources = re.findall(r'<script[^>]*src="([^"]+)"', html)
    assert sources and all(src.startswith("/static/ninja/") for src in sources)
    assert "cdn" not in html.lower()
    # every <script> without src is JSON data (not executed, so script-src 'self' allows the page)
    inline = re.findall(r"<script(?![^>]*src=)([^>]*)>", html)
    assert all('type="application/json"' in attrs for attrs in inline)
    for src in sources:
        # the file's own name: after `make run`'s collectstatic the page names its hashed copy (name.<12 hex>.js)
        assert finders.find(re.sub(r"\.[0-9a-f]{12}(\.\w+)$", r"\1", src.removeprefix("/static/"))), src
