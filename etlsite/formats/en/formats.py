"""How Django writes a date or time wherever a page does not choose (the admin's lists and read-only fields):
the one way of scheduler/timefmt.py, in the viewer's zone (activated per request), to the second, zone named."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
