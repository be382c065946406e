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
