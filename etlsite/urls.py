from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from scheduler.api.errors import route_not_found
from scheduler.api.main import api as api_v1

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # browsers ask for /favicon.ico on pages that name no icon (the Django admin's)
    path("favicon.ico", RedirectView.as_view(url=static("scheduler/favicon.svg"), permanent=True),
         name="favicon"),
    # the REST API v1; any other path under it is a problem+json 404, never the HTML page
    path("api/v1/", api_v1.urls),
    re_path(r"^api/v1/(?P<rest>.*)$", route_not_found, name="api_v1_not_found"),
    path("", include("scheduler.urls")),
]
