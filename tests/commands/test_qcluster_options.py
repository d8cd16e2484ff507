"""`qcluster` refuses a bad --grace before it starts anything, naming the option."""
import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("grace", ["-1", "nan", "inf"])
def test_a_grace_that_is_not_a_finite_number_of_seconds_is_refused(grace):
    with pytest.raises(CommandError, match="--grace: must be zero or more seconds"):
        call_command("qcluster", "--grace", grace)
