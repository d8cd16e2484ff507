from django.db import models


def _run(help_text: str) -> models.ForeignKey:
    # no database constraint and no cascade: a prune deletes runs in bulk, and services/outcomes.py then points
    # the row at the next run the ledger holds (outcomes_after_prune), in the same transaction; no index either
    # (a row per schedule)
    return models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.DO_NOTHING,
                             db_constraint=False, db_index=False, related_name="+", help_text=help_text)


class LatestOutcome(models.Model):
    """Each schedule's latest success and failure, kept as its runs end (services/outcomes.py).

    What the overview's "Failing" items and its failure work list stand on: one row per schedule instead of
    index seeks into the ledger per schedule on every refresh (issue 25). "Live" runs are the schedule's own, not
    a backfill's. The row always says what the ledger says: it is written in the transaction that ends the run,
    and a prune that deletes a run it names moves it to the next one the ledger holds.
    """

    schedule = models.OneToOneField("scheduler.Schedule", on_delete=models.CASCADE, primary_key=True,
                                    related_name="outcome")
    live_success = _run("The schedule's live SUCCEEDED run with the highest id.")
    live_failure = _run("The schedule's live FAILED run with the highest id.")
    failure = _run("The schedule's FAILED run with the highest id, backfill windows included.")
    failure_at = models.DateTimeField(null=True, blank=True, help_text="When `failure` finished.")
    success = _run("The schedule's SUCCEEDED run that finished last (backfill windows included; the higher id on "
                   "a tie).")
    success_at = models.DateTimeField(null=True, blank=True, help_text="When `success` finished.")

    def __str__(self) -> str:
        return (f"schedule {self.schedule_id}: live success {self.live_success_id}, live failure "
                f"{self.live_failure_id}, failure {self.failure_id}, success {self.success_id}")
