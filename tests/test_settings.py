"""Bad settings fail at start-up with a message naming the variable."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for Playwright; a deployment never has it
DROP = {"DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}


def _check(env: dict) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in DROP}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(
    "env, message",
    [
        ({"DEBUG": "maybe"}, "DEBUG: expected one of"),
        ({"Q_TIMEOUT": "100", "Q_RETRY": "50"}, "Q_RETRY: must be greater than Q_TIMEOUT"),
        ({"Q_WORKERS": "zero"}, "Q_WORKERS: expected an integer"),
        ({"TIME_ZONE": "Mars/Base"}, "TIME_ZONE: unknown time zone"),
        ({"REDIS_URL": "http://localhost:6379"}, "REDIS_URL: expected redis://"),
        ({"SECRET_KEY": "short"}, "SECRET_KEY: must be at least 32 characters"),
        ({"ETL_DISPATCH_INTERVAL": "-1"}, "ETL_DISPATCH_INTERVAL: must be >="),
        ({"DATABASE_URL": "nosuchdb://x/y"}, "DATABASE_URL"),
        ({"ETL_WEB_WORKERS": "0"}, "ETL_WEB_WORKERS: must be >="),
        ({"ETL_WEB_THREADS": "many"}, "ETL_WEB_THREADS: expected an integer"),
        ({"ETL_RETENTION_RUNS_DAYS": "-1"}, "ETL_RETENTION_RUNS_DAYS: must be >= 0"),
        ({"ETL_RETENTION_EVENTS_DAYS": "a month"}, "ETL_RETENTION_EVENTS_DAYS: expected an integer"),
        ({"ETL_RETENTION_AUDIT_DAYS": "0"}, "ETL_RETENTION_AUDIT_DAYS: must be >= 1"),
        ({"ETL_AUDIT_ARCHIVE_DIR": "var/audit"}, "ETL_AUDIT_ARCHIVE_DIR: must be an absolute path"),
        ({"ETL_PRUNE_BATCH": "0"}, "ETL_PRUNE_BATCH: must be >= 1"),
        ({"ETL_RUN_LOG_MAX_LINES": "2000000"}, "ETL_RUN_LOG_MAX_LINES: must be at most 1000000"),
    ],
)
def test_a_bad_environment_variable_stops_start_up_naming_it(env, message):
    result = _check(env)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_default_environment_passes_the_system_checks():
    result = _check({})
    assert result.returncode == 0, result.stderr


def test_settings_keep_the_throughput_and_safety_defaults():
    from django.conf import settings

    assert settings.Q_CLUSTER["save_limit"] == -1
    assert settings.Q_CLUSTER["timeout"] < settings.Q_CLUSTER["retry"]
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] > 0
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        options = settings.DATABASES["default"]["OPTIONS"]
        assert options["transaction_mode"] == "IMMEDIATE"
        assert "journal_mode=WAL" in options["init_command"]


def test_production_settings_pass_the_deploy_checks():
    env = {
        "SECRET_KEY": "x" * 20 + "-production-secret-0123456789abcdef",
        "HTTPS": "true",
        "SECURE_SSL_REDIRECT": "true",
        "SECURE_HSTS_SECONDS": "31536000",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "etl.example.com",
    }
    full = {k: v for k, v in os.environ.items() if k not in DROP}
    full.update(env)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                            env=full, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr + result.stdout


def test_https_alone_makes_check_deploy_clean():
    env = {"SECRET_KEY": "x" * 20 + "-production-secret-0123456789abcdef", "HTTPS": "true",
           "ALLOWED_HOSTS": "etl.example.com"}
    full = {k: v for k, v in os.environ.items() if k not in DROP | {"SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"}}
    full.update(env)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                            env=full, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr + result.stdout
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'etlsite.settings'); "
            "django.setup(); from django.conf import settings as s; "
            "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)",
        ],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.stdout.split() == ["True", "True", "True", "31536000"], shown.stderr


def _setting(name: str, env: dict) -> str:
    full = {k: v for k, v in os.environ.items() if k not in DROP | {"ETL_RUN_LOG_MAX_BYTES", "ETL_LOG_MAX_BYTES"}}
    full.update(env, DJANGO_SETTINGS_MODULE="etlsite.settings")
    code = f"import django; django.setup(); from django.conf import settings; print(settings.{name})"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_the_run_log_cap_answers_to_its_issue_name_too():
    assert _setting("ETL_RUN_LOG_MAX_BYTES", {"ETL_LOG_MAX_BYTES": "5000"}) == "5000"
    assert _setting("ETL_RUN_LOG_MAX_BYTES", {"ETL_LOG_MAX_BYTES": "5000", "ETL_RUN_LOG_MAX_BYTES": "8000"}) == "8000"


def test_the_fence_must_come_before_governance_may_call_a_run_lost():
    result = _check({"ETL_STUCK_SECONDS": "10", "ETL_FENCE_SECONDS": "10"})
    assert result.returncode != 0 and "ETL_FENCE_SECONDS: must be less than ETL_STUCK_SECONDS (10)" in result.stderr
    assert _setting("ETL_FENCE_SECONDS", {"ETL_STUCK_SECONDS": "60", "ETL_HEARTBEAT_SECONDS": "5"}) == "45.0"
