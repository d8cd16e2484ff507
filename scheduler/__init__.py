"""The ETL scheduler app. `scheduler.core` is the Django-free engine."""
