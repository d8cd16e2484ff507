"""/api/v1/docs renders Swagger UI as served in production: DEBUG off, WhiteNoise, our CSP, no CDN."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_docs_render_under_our_csp(page, server):
    bad: list[str] = []
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: bad.append(f"failed {r.url}: {r.failure}"))
    page.on("console", lambda m: bad.append(f"console {m.type}: {m.text}")
            if "Content Security Policy" in m.text or "Content-Security-Policy" in m.text else None)
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(server.url) else None)
    page.goto("/api/v1/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
    assert "ETL scheduler API" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector('[data-path="/api/v1/schedules/{name}/runs"]', state="attached")
    assert bad == [] and outside == []
