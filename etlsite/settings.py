"""Settings for the ETL scheduler, read from the environment.

Django's own settings and the scheduler's core are here; a few topics an operator looks up alone are in modules of
their own, imported below where they stood: etlsite/settings_alerts.py, settings_oncall.py, settings_lineage.py,
settings_retention.py and settings_secrets.py.

SQLite and django-q2's ORM broker are the embedded default so a fresh clone
runs; set DATABASE_URL (PostgreSQL) and REDIS_URL (Redis broker) to scale out.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from etlsite.env import envbool, envfloat, envint, envlist, envstr
from scheduler.core.timing import timing_problems

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("ETL_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DEBUG", False)

SECRET_KEY = envstr("SECRET_KEY", "")
if not SECRET_KEY:
    # A development key is generated once per checkout and kept in var/ so that
    # sessions survive restarts; production must set SECRET_KEY.
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        # linked into place: of processes starting together (test passes side by side) the first wins, all read it
        _tmp = VAR_DIR / f"secret_key.{os.getpid()}"
        _tmp.write_text(secrets.token_urlsafe(50))
        _tmp.chmod(0o600)
        with contextlib.suppress(FileExistsError):
            os.link(_tmp, _key_file)
        _tmp.unlink()
    SECRET_KEY = _key_file.read_text().strip()
elif len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("SECRET_KEY: must be at least 32 characters long")

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # scheduler first: its `qcluster` command wraps django-q2's to start our loops.
    "scheduler.apps.SchedulerConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "django_q",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "etlsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "etlsite.wsgi.application"

# --- database -------------------------------------------------------------
_default_db_url = f"sqlite:///{VAR_DIR / 'etl.sqlite3'}"
try:
    _db = dj_database_url.parse(envstr("DATABASE_URL", _default_db_url), conn_max_age=600)
except Exception as exc:  # dj-database-url raises several types for bad URLs
    raise ImproperlyConfigured(f"DATABASE_URL: cannot parse ({exc})") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so two writers queue instead
        # of failing with "database is locked" halfway through a transaction.
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
    # Tests that start a real qcluster need the test database on disk.
    _db["TEST"] = {"NAME": str(VAR_DIR / f"test_{envstr('ETL_TEST_DB_SUFFIX', 'main')}.sqlite3")}
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db["CONN_HEALTH_CHECKS"] = True
    # No JIT: the scheduler's queries are short lookups, and at millions of runs a planner's cost estimate crosses
    # jit_above_cost and pays 50-200 ms of compilation for a query that reads nothing (docs/benchmarks.md, issue 25)
    _db.setdefault("OPTIONS", {})["options"] = (_db.get("OPTIONS", {}).get("options", "") + " -c jit=off").strip()
    _db["TEST"] = {"NAME": envstr("ETL_TEST_DB_NAME", "test_etl_scheduler")}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Under pytest (PYTEST_VERSION, inherited by the servers tests start) MD5: PBKDF2 costs ~0.3 s a user. Never otherwise.
if envstr("PYTEST_VERSION", ""):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = envstr("TIME_ZONE", "UTC")
try:
    import zoneinfo

    zoneinfo.ZoneInfo(TIME_ZONE)
except Exception:
    raise ImproperlyConfigured(f"TIME_ZONE: unknown time zone {TIME_ZONE!r}") from None
USE_I18N = False
USE_TZ = True
# dates and times the admin writes: one format with the pages (etlsite/formats/en/formats.py, issue 37)
FORMAT_MODULE_PATH = ["etlsite.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles"))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "scheduler:overview"
LOGOUT_REDIRECT_URL = "login"
# a stale CSRF token (signed out or in again in another tab) is said as such; an htmx request that is no longer
# signed in is sent to the login page as a whole page (scheduler/views/signin.py)
CSRF_FAILURE_VIEW = "scheduler.views.signin.csrf_failure"

SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG and envbool("HTTPS", False))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("BEHIND_TLS_PROXY", False) else None
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "etl-scheduler@localhost")

# --- django-q2 ------------------------------------------------------------
REDIS_URL = envstr("REDIS_URL", "")
Q_TIMEOUT = envint("Q_TIMEOUT", 3600, minimum=1)
Q_RETRY = envint("Q_RETRY", Q_TIMEOUT + 300, minimum=2)
if Q_RETRY <= Q_TIMEOUT:
    # A task that runs longer than `retry` is delivered a second time.
    raise ImproperlyConfigured(f"Q_RETRY: must be greater than Q_TIMEOUT ({Q_TIMEOUT}), got {Q_RETRY}")
Q_CLUSTER = {
    # The queue's name: the same on every cluster so any worker can take any run.
    # A cluster's identity comes from `qcluster --name` (ETL_CLUSTER_ID), not from here.
    "name": envstr("ETL_QUEUE_NAME", "etl"),
    "workers": envint("Q_WORKERS", 2, minimum=1),
    "recycle": 500,
    "timeout": Q_TIMEOUT,
    "retry": Q_RETRY,
    "save_limit": -1,  # our run ledger is the record; django-q's is not needed
    "ack_failures": True,
    "max_attempts": 1,
    "catch_up": False,
    "poll": envfloat("Q_POLL", 0.05, minimum=0.01),
    "queue_limit": envint("Q_QUEUE_LIMIT", 50, minimum=1),
    "label": "Task queue",
    "log_level": envstr("Q_LOG_LEVEL", "WARNING"),
}
if REDIS_URL:
    if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"REDIS_URL: expected redis://host:port/db, got {REDIS_URL!r}")
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# --- the scheduler --------------------------------------------------------
ETL_DISPATCH_INTERVAL = envfloat("ETL_DISPATCH_INTERVAL", 0.1, minimum=0.01)
# PostgreSQL: a transaction that queues a run sends NOTIFY at commit, and the dispatch loop wakes for it instead of
# waiting for its poll (scheduler/services/admission/wakeup.py). Off: neither, the poll alone (docs/deploy.md).
ETL_DISPATCH_WAKE = envbool("ETL_DISPATCH_WAKE", True)
if not ETL_DISPATCH_WAKE and _db["ENGINE"] == "django.db.backends.postgresql":
    _db["OPTIONS"]["options"] = (_db["OPTIONS"]["options"] + " -c etl.dispatch_wake=off").strip()
ETL_GOVERNANCE_INTERVAL = envfloat("ETL_GOVERNANCE_INTERVAL", 15.0, minimum=0.1)
ETL_LEASE_SECONDS = envfloat("ETL_LEASE_SECONDS", 20.0, minimum=1.0)
ETL_HEARTBEAT_SECONDS = envfloat("ETL_HEARTBEAT_SECONDS", 5.0, minimum=0.1)
ETL_STUCK_SECONDS = envfloat("ETL_STUCK_SECONDS", 60.0, minimum=1.0)
# A RUNNING run asked to stop (cancel, timeout) gets this long to stop by itself; then a command's process group
# gets SIGKILL and a Python pipeline's worker process is ended (docs/semantics.md, "Stopping a run").
ETL_CANCEL_GRACE_SECONDS = envfloat("ETL_CANCEL_GRACE_SECONDS", 30.0, minimum=0.0)
# A worker that could not renew its heartbeat for this long stops its own runs (fencing), so it has stopped before
# governance may call them lost (ETL_STUCK_SECONDS) and start another copy.
ETL_FENCE_SECONDS = envfloat(
    "ETL_FENCE_SECONDS", max(ETL_STUCK_SECONDS / 2, ETL_STUCK_SECONDS - 3 * ETL_HEARTBEAT_SECONDS), minimum=0.1
)
# the rules between the worker's threads and governance (scheduler/core/timing.py)
_timing = timing_problems(fence=ETL_FENCE_SECONDS, stuck=ETL_STUCK_SECONDS, grace=ETL_CANCEL_GRACE_SECONDS)
if _timing:
    raise ImproperlyConfigured(_timing[0])
ETL_DISPATCH_BATCH = envint("ETL_DISPATCH_BATCH", 200, minimum=1)
# When a tick admits more runs than the cluster has workers, up to this many go in one broker message
# and one worker runs them one after another (1: one run per message always). docs/semantics.md, "Batches". 64, not
# 16: a message's own statements and broker hop, shared by more runs, took scenario 1 on PostgreSQL + Redis from
# 112 % to 166 % of raw django-q2 (docs/benchmarks.md); the budget and the flush below bound what a batch holds back.
ETL_RUN_BATCH_MAX = envint("ETL_RUN_BATCH_MAX", 64, minimum=1)
# A worker running a batch writes the ends of the runs it finished at least this often.
ETL_BATCH_FLUSH_SECONDS = envfloat("ETL_BATCH_FLUSH_SECONDS", 0.5, minimum=0.0)
# A worker begins another run of its batch only within this many seconds of the batch's start; the runs it did not
# begin go back to the broker as a new message. So a batch never runs into django-q2's timeout (Q_TIMEOUT), and a
# long run does not hold short ones behind it.
ETL_BATCH_BUDGET_SECONDS = envfloat("ETL_BATCH_BUDGET_SECONDS", 10.0, minimum=0.0)
# A worker that ended a capped watermark window or a backfill window admits the next one and runs it itself, within
# ETL_BATCH_BUDGET_SECONDS (docs/semantics.md, "Overlap and catch-up policies"); off: the dispatch loop and the broker
# carry every window, as for any run.
ETL_CATCHUP_ON_WORKER = envbool("ETL_CATCHUP_ON_WORKER", True)
ETL_MAX_BACKFILL_WINDOWS = envint("ETL_MAX_BACKFILL_WINDOWS", 100_000, minimum=1)
ETL_WEBHOOK_REPLAY_SECONDS = envint("ETL_WEBHOOK_REPLAY_SECONDS", 300, minimum=1)
ETL_WEBHOOK_MAX_BYTES = envint("ETL_WEBHOOK_MAX_BYTES", 1_048_576, minimum=1)
ETL_EVENT_TOKENS = envlist("ETL_EVENT_TOKENS", [])
ETL_METRICS_TOKEN = envstr("ETL_METRICS_TOKEN", "")
from etlsite.settings_alerts import *  # noqa: E402, F403 (alert channels and delivery)
# Modules that register pipelines, on top of the built-in ones and every installed package's (entry point group
# `etl_scheduler.pipelines`, docs/your-code.md); this list only adds.
ETL_PIPELINE_MODULES = envlist("ETL_PIPELINE_MODULES", [])
# How often each cluster writes that it is alive and looks for newer code installed beside it (or a reload request)
ETL_CODE_CHECK_SECONDS = envfloat("ETL_CODE_CHECK_SECONDS", 10.0, minimum=0.1)
# How long a run whose pipeline or workflow no running cluster knows stays QUEUED for new code before it fails
ETL_UNKNOWN_TARGET_SECONDS = envfloat("ETL_UNKNOWN_TARGET_SECONDS", 600.0, minimum=0.0)
# Built-in pipelines read and write files only inside this directory (symbolic links resolved first); run params
# never name a path (docs/security.md). The demo's files default to it.
ETL_FILES_DIR = envstr("ETL_FILES_DIR", str(VAR_DIR / "files"))
ETL_DEMO_SOURCE_DB = envstr("ETL_DEMO_SOURCE_DB", str(Path(ETL_FILES_DIR) / "demo_source.sqlite3"))
ETL_DEMO_WAREHOUSE_DB = envstr("ETL_DEMO_WAREHOUSE_DB", str(Path(ETL_FILES_DIR) / "demo_warehouse.sqlite3"))
ETL_DEMO_REPORT_DIR = envstr("ETL_DEMO_REPORT_DIR", str(Path(ETL_FILES_DIR) / "reports"))
# setup_demo writes the logins it creates here (mode 0600); `serve` shows them in a box once the cluster is up
ETL_DEMO_LOGINS_FILE = envstr("ETL_DEMO_LOGINS_FILE", str(VAR_DIR / "demo-logins.txt"))
# dbt targets (docs/dbt.md): the program (empty: the `dbt` beside this Python, else the one on PATH), and where each
# run's --target-path and --log-path go (one directory per run and attempt, so concurrent runs never share one)
ETL_DBT_EXECUTABLE = envstr("ETL_DBT_EXECUTABLE", "")
ETL_DBT_RUNS_DIR = envstr("ETL_DBT_RUNS_DIR", str(VAR_DIR / "dbt-runs"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "scheduler": {"handlers": ["console"], "level": envstr("ETL_LOG_LEVEL", "INFO")},
        "django_q": {"handlers": ["console"], "level": envstr("Q_LOG_LEVEL", "WARNING"), "propagate": False},
    },
}

# --- serve settings ---
# Static files are served by WhiteNoise from STATIC_ROOT (filled by `collectstatic`,
# which `manage.py serve` runs first), with DEBUG off exactly as in production.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "whitenoise.middleware.WhiteNoiseMiddleware"
)
# and straight from the apps' and static/'s own files when STATIC_ROOT lacks them (a server started without
# `serve`'s collectstatic, or STATIC_ROOT pointed at an empty directory): never a page without its CSS and htmx.
# The finders' files replace the collected ones under the same plain URL (app.css), uncompressed and cached 60 s,
# so pages name the hashed copy collectstatic made (app.3f2a….css, gzipped beside it, cached for ever, issue 37);
# a name the manifest lacks (nothing collected) stays plain and comes from the finders (etlsite/static_storage.py)
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "etlsite.static_storage.HashedOrPlainStorage"},
}
# HTML is gzipped (inside WhiteNoise, which serves its own precompressed files). BREACH: Django's GZipMiddleware
# pads each response by a random length, the CSRF token is masked per response, and a page that shows a secret
# (a new API token) is sent uncompressed (scheduler.middleware.never_compressed)
MIDDLEWARE.insert(MIDDLEWARE.index("whitenoise.middleware.WhiteNoiseMiddleware") + 1,
                  "scheduler.middleware.CompressHtml")
# after the session and auth middleware: the viewer's display zone lives in their session
MIDDLEWARE.append("scheduler.middleware.DisplayTimezoneMiddleware")
ETL_ADDR = envstr("ETL_ADDR", "127.0.0.1:8000")
ETL_WEB_WORKERS = envint("ETL_WEB_WORKERS", 2, minimum=1)
ETL_WEB_THREADS = envint("ETL_WEB_THREADS", 4, minimum=1)  # gthread only
# gevent: one greenlet per connection, so clients that send a body a byte at a time hold no thread and cannot
# starve the dashboard; gthread only behind a front that buffers whole requests (nginx), see docs/security.md
ETL_WEB_WORKER_CLASS = envstr("ETL_WEB_WORKER_CLASS", "gevent")
ETL_WEB_WORKER_CONNECTIONS = envint("ETL_WEB_WORKER_CONNECTIONS", 1000, minimum=1)  # gevent: open connections
ETL_WEB_TIMEOUT = envint("ETL_WEB_TIMEOUT", 30, minimum=1)  # a worker silent this long is restarted
ETL_WEB_KEEPALIVE = envint("ETL_WEB_KEEPALIVE", 5, minimum=0)  # seconds an idle keep-alive connection stays

# --- authoring settings ---
# A cron or interval fire older than this when the dispatcher reaches it was missed (the cluster was
# down); the schedule's catch-up policy decides what it becomes.
ETL_CATCHUP_GRACE_SECONDS = envint("ETL_CATCHUP_GRACE_SECONDS", 60, minimum=1)
# --- end authoring settings ---

from etlsite.settings_oncall import *  # noqa: E402, F403 (run log caps and level, the timeline)
# --- hardening settings ---
# With DEBUG off Django sends request errors only to mail_admins: log every 500 (with its traceback) and every
# refused request (django.security: bad Host, CSRF) to the console, where the process manager collects them.
LOGGING["loggers"]["django.request"] = {"handlers": ["console"], "level": "ERROR", "propagate": False}
LOGGING["loggers"]["django.security"] = {"handlers": ["console"], "level": "WARNING", "propagate": False}
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "scheduler.middleware.NoStoreForSignedInUsers",
)

# --- end hardening settings (first part) ---

# --- teams settings ---
# Object permissions (django-rules): an operator acts only on schedules of a team they belong to.
AUTHENTICATION_BACKENDS = [
    "rules.permissions.ObjectPermissionBackend",
    "django.contrib.auth.backends.ModelBackend",
]
ETL_DEFAULT_TEAM = envstr("ETL_DEFAULT_TEAM", "default")  # owner of schedules made without one
ETL_TEAMS_VIEW_ALL = envbool("ETL_TEAMS_VIEW_ALL", True)  # viewers and operators see other teams read-only
# a refusal is one audit entry per actor, permission, object and window; repeats in the window are only counted
ETL_AUDIT_REFUSAL_WINDOW_SECONDS = envint("ETL_AUDIT_REFUSAL_WINDOW_SECONDS", 300, minimum=1)
# --- end teams settings ---

# --- hardening settings (continued) ---

# Login throttling (django-axes): after ETL_LOGIN_FAILURE_LIMIT wrong passwords for one user from one address the
# login is locked for ETL_LOGIN_COOLOFF_MINUTES; admins see and clear lock-outs in the admin (Axes > Access attempts).
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as django-axes requires
# axes first, as it requires; then the teams backends above
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", *AUTHENTICATION_BACKENDS]
AXES_FAILURE_LIMIT = envint("ETL_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = envint("ETL_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "scheduler.middleware.client_ip"  # behind the TLS proxy, the address the proxy saw
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# HTTPS=true (the site is served over TLS) turns on what goes with it unless set otherwise: Secure cookies (above),
# a redirect from http, and HSTS for a year. BEHIND_TLS_PROXY=true trusts the proxy's X-Forwarded-Proto.
if envbool("HTTPS", False):
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)

# --- CSP settings ---
# A Content-Security-Policy that fits htmx (django-csp): scripts only from this site; 'unsafe-eval' because htmx
# evaluates hx-trigger filters ("every 3s [document.visibilityState === 'visible']") with Function(); inline
# style attributes, which htmx's indicator styles and idiomorph set, are allowed. No inline <script> anywhere.
from csp.constants import NONE, SELF, UNSAFE_EVAL, UNSAFE_INLINE  # noqa: E402

INSTALLED_APPS.append("csp")
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "csp.middleware.CSPMiddleware")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, UNSAFE_EVAL],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

from etlsite.settings_lineage import *  # noqa: E402, F403 (OpenLineage)
# --- api settings ---
# The REST API (/api/v1/, django-ninja): "ninja" serves Swagger UI's files from our static files (no CDN, fits the
# CSP above); the middleware answers every error under /api/v1/ as application/problem+json.
INSTALLED_APPS.append("ninja")
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.common.CommonMiddleware") + 1,
                  "scheduler.api.errors.ApiProblemMiddleware")
# --- end api settings ---
from etlsite.settings_retention import *  # noqa: E402, F403 (what is kept how long, the prune)
from etlsite.settings_secrets import *  # noqa: E402, F403 (server secrets, connections, a command's environment)
