from django.urls import path

from scheduler.views import api, hooks, pages

app_name = "scheduler"

urlpatterns = [
    path("", pages.overview, name="overview"),
    path("runs/", pages.run_list, name="runs"),
    path("runs/<int:run_id>/", pages.run_detail, name="run_detail"),
    path("api/status", api.status, name="api_status"),
    path("api/events/<str:topic>", hooks.event, name="event"),
    path("hooks/<str:name>", hooks.webhook, name="webhook"),
]
