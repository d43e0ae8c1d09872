"""perfmodel.units: the parsers of durations, counts, percentages, pools, mixes and prices."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.errors import InputError
from perfmodel.units import parse_count, parse_duration, parse_fraction, parse_mix, parse_pool, parse_prices

PARSERS = (parse_count, parse_duration, parse_fraction, parse_mix, parse_pool, parse_prices)


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("60s", 60),
        ("60", 60),
        ("1.5m", 90),
        ("250ms", 0.25),
        ("2h", 7200),
        ("2 h", 7200),
        ("1min", 60),
        (".5s", 0.5),
        ("1e3ms", 1.0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "60 sec s", "-1s", "0s", "1d", "1.5.2s", "inf", "nan", "60S"])
def test_malformed_durations_say_how_to_write_one(text):
    with pytest.raises(InputError, match="duration|longer than zero"):
        parse_duration(text, "--deadline")


@pytest.mark.parametrize(
    "text, count",
    [
        ("100000", 100000),
        ("100k", 100000),
        ("100K", 100000),
        ("1.5M", 1500000),
        ("2G", 2 * 10**9),
        ("0", 0),
        ("100,000", 100000),
        ("100_000", 100000),
        ("1.25k", 1250),
    ],
)
def test_counts(text, count):
    assert parse_count(text) == count


@pytest.mark.parametrize(
    "text, match",
    [
        ("1.5m", "use M for millions"),
        ("1.2345k", "whole number"),
        ("1.5", "whole number"),
        ("-3", "negative"),
        ("10,00", "not a count"),
        ("k", "not a count"),
        ("1e5", "not a count"),
        ("", "not a count"),
    ],
)
def test_malformed_counts(text, match):
    with pytest.raises(InputError, match=match):
        parse_count(text)


@pytest.mark.parametrize("text, fraction", [("5%", 0.05), ("0.05", 0.05), ("0", 0.0), ("0%", 0.0), ("99.5%", 0.995)])
def test_fractions(text, fraction):
    assert parse_fraction(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["5", "100%", "-1%", "abc", "1.0", "nan%"])
def test_malformed_fractions(text):
    with pytest.raises(InputError):
        parse_fraction(text)


def test_pools_prices_and_mixes():
    assert parse_pool("h100=8,a100=4") == {"h100": 8, "a100": 4}
    assert parse_pool(" cpu = 0 ") == {"cpu": 0}
    assert parse_prices("h100=2.5,a100=1") == {"h100": 2.5, "a100": 1.0}
    assert parse_mix("224=70000,512=30k") == {224: 70000, 512: 30000}
    assert parse_mix("224=70%,512=30%", 1001) == {224: 701, 512: 300}
    assert sum(parse_mix("64=33.3%,128=33.3%,224=33.4%", 10).values()) == 10


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: parse_pool("h100"), "KEY=VALUE"),
        (lambda: parse_pool("h100=8,h100=2"), "twice"),
        (lambda: parse_pool("h100=-1"), "negative: give a whole number of GPUs"),
        (lambda: parse_pool("h100=1.5"), "not a whole number of GPUs"),
        (lambda: parse_pool("h 100=1"), "GPU type name"),
        (lambda: parse_prices("h100=cheap"), "price"),
        (lambda: parse_mix("224=70%,512=20%", 100), "add up to 100"),
        (lambda: parse_mix("224=70%,512=30%"), "needs `images`"),
        (lambda: parse_mix("224=70%,512=300"), "mixes counts and percentages"),
        (lambda: parse_mix("224=7,512=3", 100), "adds up to 10"),
        (lambda: parse_mix("big=7"), "pixels"),
    ],
)
def test_malformed_lists(call, match):
    with pytest.raises(InputError, match=match):
        call()


@given(st.integers(0, 10**15))
def test_count_round_trips(n):
    assert parse_count(str(n)) == n
    assert parse_count(f"{n:,}") == n
    assert parse_count(f"{n}k") == n * 1000


@given(st.integers(0, 10**6), st.sampled_from(["k", "M", "G"]), st.integers(0, 999))
def test_decimal_counts_are_exact(whole, suffix, thousandths):
    scale = {"k": 10**3, "M": 10**6, "G": 10**9}[suffix]
    assert parse_count(f"{whole}.{thousandths:03d}{suffix}") == whole * scale + thousandths * scale // 1000


@given(st.floats(1e-3, 8e4), st.sampled_from([("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]))
def test_duration_round_trips(value, unit):
    suffix, scale = unit
    assert parse_duration(f"{value!r}{suffix}") == pytest.approx(value * scale, rel=1e-12)


@given(st.text(max_size=20))
def test_any_text_parses_or_gives_an_input_error(text):
    for parser in PARSERS:
        try:
            parser(text)
        except InputError as exc:
            assert str(exc) and "\n" not in str(exc)


@given(st.integers(0, 10**7), st.lists(st.integers(0, 100), max_size=4))
def test_percentage_mixes_add_up_exactly(images, cuts):
    edges = [0, *sorted(cuts), 100]
    parts = [b - a for a, b in zip(edges, edges[1:])]
    counts = parse_mix(",".join(f"{64 + i}={p}%" for i, p in enumerate(parts)), images)
    assert sum(counts.values()) == images
    assert all(abs(counts[64 + i] - images * p / 100) < 1 for i, p in enumerate(parts))
