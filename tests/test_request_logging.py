"""Server errors leave a trace: with DEBUG off, a 500 logs its traceback to the console."""
from __future__ import annotations

import io
import logging

import pytest
from django.http import HttpResponse
from django.test import Client
from django.urls import path


def boom(request):
    raise RuntimeError("the pipeline registry exploded")


def fine(request):
    return HttpResponse("ok")


urlpatterns = [path("boom", boom), path("fine", fine)]


@pytest.fixture
def console():
    """What the configured handlers of django.request write, captured."""
    handlers = [h for h in logging.getLogger("django.request").handlers if isinstance(h, logging.StreamHandler)]
    assert handlers, "django.request has no console handler: 500s would leave no trace with DEBUG off"
    buffer = io.StringIO()
    old = [h.setStream(buffer) for h in handlers]
    yield buffer
    for handler, stream in zip(handlers, old):
        handler.setStream(stream)


@pytest.mark.urls("tests.test_request_logging")
def test_a_500_logs_its_traceback_with_debug_off(console, settings, db):
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get("/boom")
    assert response.status_code == 500
    text = console.getvalue()
    assert "Internal Server Error: /boom" in text and "Traceback" in text
    assert "RuntimeError: the pipeline registry exploded" in text


@pytest.mark.urls("tests.test_request_logging")
def test_a_good_request_logs_nothing(console, settings, db):
    settings.DEBUG = False
    assert Client().get("/fine").status_code == 200
    assert console.getvalue() == ""
