from django.urls import path

from scheduler.views import api, audit, backfills, hooks, metrics, pages, prefs, schedules, teams

app_name = "scheduler"

urlpatterns = [
    path("", pages.overview, name="overview"),
    path("runs/", pages.run_list, name="runs"),
    path("runs/blocked/", pages.blocked_list, name="blocked"),
    path("runs/skipped/", pages.skipped_list, name="skipped"),
    path("runs/<int:run_id>/", pages.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel", pages.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/log", pages.run_log, name="run_log"),
    path("runs/<int:run_id>/rerun", pages.run_rerun, name="run_rerun"),
    path("timeline/", pages.timeline, name="timeline"),
    path("runs/<int:run_id>/rerun-from-failure", pages.run_rerun_failed, name="run_rerun_failed"),
    path("schedules/", schedules.schedule_list, name="schedules"),
    path("schedules/graph/", schedules.dependency_graph, name="graph"),
    path("schedules/<int:schedule_id>/", schedules.schedule_detail, name="schedule_detail"),
    path("schedules/<int:schedule_id>/toggle", schedules.schedule_toggle, name="schedule_toggle"),
    path("schedules/<int:schedule_id>/run", schedules.schedule_run_now, name="schedule_run_now"),
    path("schedules/<int:schedule_id>/watermark", schedules.schedule_watermark, name="schedule_watermark"),
    path("schedules/<int:schedule_id>/breaker/reset", schedules.schedule_breaker_reset, name="breaker_reset"),
    path("schedules/<int:schedule_id>/channels/<int:index>/test", schedules.schedule_channel_test,
         name="schedule_channel_test"),
    path("teams/<int:team_id>/", teams.team_detail, name="team_detail"),
    path("teams/<int:team_id>/channels/<int:index>/test", teams.team_channel_test, name="team_channel_test"),
    path("backfills/", backfills.backfill_list, name="backfills"),
    path("backfills/submit", backfills.backfill_submit, name="backfill_submit"),
    path("backfills/<int:backfill_id>/", backfills.backfill_detail, name="backfill_detail"),
    path("backfills/<int:backfill_id>/pause", backfills.backfill_pause, name="backfill_pause"),
    path("backfills/<int:backfill_id>/resume", backfills.backfill_resume, name="backfill_resume"),
    path("backfills/<int:backfill_id>/cancel", backfills.backfill_cancel, name="backfill_cancel"),
    path("backfills/<int:backfill_id>/retry", backfills.backfill_retry, name="backfill_retry"),
    path("preferences/", prefs.preferences, name="preferences"),
    path("audit/", audit.audit_report, name="audit"),
    path("audit/export.csv", audit.audit_csv, name="audit_csv"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/status", api.status, name="api_status"),
    path("api/events/<str:topic>", hooks.event, name="event"),
    path("hooks/<str:name>", hooks.webhook, name="webhook"),
]
