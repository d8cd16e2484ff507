"""Who may do what: teams and their members, API tokens, event tokens."""
from scheduler.services.access.teams import authorize, team_save, team_delete, team_set_members, visible_team_ids
from scheduler.services.access.tokens import token_create, token_revoke, token_authenticate
from scheduler.services.access.event_tokens import event_token_create, event_token_revoke, event_token_authenticate

__all__ = [
    "authorize", "team_save", "team_delete", "team_set_members", "visible_team_ids", "token_create", "token_revoke",
    "token_authenticate", "event_token_create", "event_token_revoke", "event_token_authenticate"
]
