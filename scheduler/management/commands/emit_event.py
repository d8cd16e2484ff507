"""`emit_event TOPIC --payload JSON [--id ID] [--json]`: emit an event like the HTTP endpoint does."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.management.cli import dump_json, fail, parse_json_object
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.events import event_emit


class Command(BaseCommand):
    help = "Emit an event on a topic; each enabled event schedule whose filter matches gets one run."

    def add_arguments(self, parser):
        parser.add_argument("topic", help="Event topic, e.g. orders.created")
        parser.add_argument("--payload", default="{}", help='JSON object, e.g. \'{"status": "confirmed"}\'')
        parser.add_argument("--id", dest="event_id", default=None,
                            help="Event id for deduplication (default: a new random id).")
        parser.add_argument("--actor", default=None, help="Who emits it (default: the shell user).")
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")

    def handle(self, *args, **opts):
        payload = parse_json_object(opts["payload"], field="--payload")
        actor = "user:" + (opts["actor"] or getpass.getuser())
        try:
            event, runs = event_emit(topic=opts["topic"], payload=payload, event_id=opts["event_id"],
                                     source=f"command {actor[5:]}", actor=actor)
        except ServiceError as exc:
            raise fail(str(exc)) from None
        result = {"event": event.pk, "topic": event.topic, "event_id": event.event_id, "duplicate": event.duplicate,
                  "runs": [{"run": r.pk, "schedule": r.schedule.name} for r in runs]}
        if opts["json"]:
            dump_json(self.stdout, result)
            return
        if event.duplicate:
            self.stdout.write(
                f"event {event.topic}#{event.event_id} was already received (event {event.pk}); no new run"
            )
            return
        started = ", ".join(f"run {r.pk} of {r.schedule.name}" for r in runs) or "no matching schedule"
        self.stdout.write(f"event {event.pk} ({event.topic}#{event.event_id}): {started}")
