"""One rule for a clock in any file (``profile.parse_clock``): the pass-level sweep's reader uses it and places the
message at the row."""

import pytest

from kdvfs.errors import FormatError, InputError
from kdvfs.gpus import AUTO
from kdvfs.passweep import _parse_clock
from kdvfs.profile import parse_clock


@pytest.mark.parametrize("text", ["x", "", "-5", "1.5", "1e9", "nan", None])
def test_sweep_clock_refused_as_in_a_profile_with_its_row(text):
    with pytest.raises(FormatError) as plain:
        parse_clock(text, "core_mhz")
    with pytest.raises(InputError) as sweep:
        _parse_clock(text, "core_mhz", "sweep 's.csv' row 3")
    assert str(sweep.value) == f"sweep 's.csv' row 3: {plain.value}; fix that cell"


@pytest.mark.parametrize(("text", "mhz"), [("auto", AUTO), (" AUTO ", AUTO), ("1200", 1200), (" 1200.0 ", 1200)])
def test_sweep_clock_accepted_as_in_a_profile(text, mhz):
    assert _parse_clock(text, "mem_mhz", "row 2") == parse_clock(text, "mem_mhz") == mhz


@pytest.mark.parametrize("number", [2**63, -5, 100_001])
def test_a_clock_given_as_a_number_is_held_to_the_same_range(number):
    """A schedule's runs carry clocks as JSON numbers: 2**63 overflowed the int64 array with a traceback (found by
    tests/test_fuzz_readers.py); now it is refused like the same number in text."""
    from kdvfs.schedule import schedule_from_dict

    with pytest.raises(FormatError, match="must be a positive whole number of MHz"):
        parse_clock(number, "core_mhz")
    with pytest.raises(FormatError, match="core_mhz .* must be a positive whole number"):
        schedule_from_dict({"format": "kdvfs-schedule/1", "trace": "t", "gpu": "rtx3080ti", "instances": 2,
                            "runs": [[number, "auto", 2]]})
    assert parse_clock(0, "core_mhz") == AUTO and parse_clock(1200, "core_mhz") == 1200
