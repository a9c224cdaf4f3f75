"""sizes.py: sizes read as Dask reads them, a bare K/M/G/T letter is binary,
nonsense and negatives are user errors, and sizes print with one decimal."""
from __future__ import annotations

import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.sizes import format_size, parse_size


@pytest.mark.parametrize("text,n", [("4GiB", 4 * 2**30), ("512MB", 512 * 10**6), ("1.5G", int(1.5 * 2**30)),
                                    ("2k", 2048), (" 3 M ", 3 * 2**20), (1000, 1000), (2.5, 2), ("0", 0)])
def test_parse_size_reads_units_and_a_bare_letter_as_binary(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["lots", "-1GiB", -5, "4 GiBs", "", " ", "GiB", "MB"])
def test_parse_size_refuses_nonsense_and_negatives_naming_the_option(text):
    with pytest.raises(UserError) as e:
        parse_size(text, "--memory-budget")
    assert e.value.message.startswith("--memory-budget") and e.value.hint


def test_format_size_keeps_one_decimal_and_short_forms_for_narrow_columns():
    assert format_size(512) == "512 B"
    assert format_size(3.3 * 2**30) == "3.3 GiB"
    assert format_size(1536 * 2**20) == "1.5 GiB"
    assert format_size(438 * 2**20, short=True) == "438M"
    assert format_size(2 * 2**30, short=True) == "2.0G"
    assert format_size(5 * 2**50) == "5120.0 TiB"


@pytest.mark.parametrize("text", ["100", "100 MB", "100M", "5kB", "5.4 kB", "1kiB", "1e6", "1e6 kB", "MB", "", "b",
                                  "3 GiB", "2TB", "1.5pib", "7 Ki", "0", "-3kB", "12 b", "5 foos", "kB5", "1.2.3MB",
                                  "GiB GiB", 123, 4.7, True])
def test_sizes_read_exactly_as_dask_reads_them_without_importing_dask(text):
    # sizes.parse_bytes stands in for dask.utils.parse_bytes (a run in this
    # process imports no Dask): the same number, or the same error.
    from dask.utils import parse_bytes as dasks

    from lancetnic_flow.sizes import parse_bytes

    def outcome(fn):
        try:
            return fn(text)
        except ValueError as exc:
            return str(exc)

    assert outcome(parse_bytes) == outcome(dasks)
