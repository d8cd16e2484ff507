"""Users and groups in the admin, for the admin group (not only superusers): Django's own pages, with the
superuser powers kept for superusers. A non-superuser cannot make anyone a superuser, hand out single
permissions, or change a superuser's account; groups and team memberships are what they manage."""
from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

SUPERUSER_ONLY = ("is_superuser", "user_permissions")


class ScopedUserAdmin(UserAdmin):
    def get_readonly_fields(self, request, obj=None):
        """Superuser status and single permissions are a superuser's to give."""
        fields = super().get_readonly_fields(request, obj)
        return fields if request.user.is_superuser else (*fields, *SUPERUSER_ONLY)

    def has_change_permission(self, request, obj=None):
        """A superuser's account is changed by a superuser only."""
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        """Likewise for deleting one."""
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


admin.site.unregister(User)
admin.site.register(User, ScopedUserAdmin)
