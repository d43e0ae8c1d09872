"""What people type, parsed: durations (60s, 1.5m, 250ms, 2h), counts (100000, 100k, 1.5M), percentages
(5%, 0.05), GPU pools (h100=8,a100=4), input-size mixes (224=70000,512=30000 or 224=70%,512=30%),
prices (h100=2.5), request rates (400/s, 20k/s, 24000/min) and percentiles (99, p99.9). Each parser
returns plain numbers or raises InputError with one sentence. figure, format_seconds and spoken_list say
numbers back to people.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from perfmodel.errors import InputError
from perfmodel.readers import UNSIGNED as _NUMBER
from perfmodel.readers import shown, whole_number  # shown: also named from here by many modules

_DURATION = re.compile(rf"([-+]?)\s*({_NUMBER})\s*(ms|s|sec|m|min|h|hr)?")
_SECONDS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, None: 1.0}
_COUNT = re.compile(r"([-+]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kKMG])?")
_SCALE = {None: 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}
GPU_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # what a pool and prices can name

# The largest values anything typed may take: beyond them the input is a slip of the keyboard, and
# the arithmetic further on (int64 image counts, float seconds) would stop being exact.
MAX_SECONDS = 10 * 365.25 * 24 * 3600  # ten years
MAX_INPUT_SIZE = 65_536  # pixels per side
MAX_BATCH_SIZE = 2**20  # images per call
MAX_PRICE = 1e6  # per GPU-hour


def figure(value: float) -> str:
    """A rate, count or cost for people: 4 significant digits, and whole with thousands separators from
    1,000 up (27,870, never 2.787e+04)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def format_seconds(value: float, up: bool = False) -> str:
    """'250 ms', '58.7 s', '12.5 min', '3.2 h' (3 significant digits); `up` rounds up, for a deadline to meet."""
    units = (("h", 3600.0, 7200.0), ("min", 60.0, 600.0), ("s", 1.0, 1.0), ("ms", 0.001, 0.0))
    unit, scale = next((u, s) for u, s, above in units if value >= above or u == "ms")
    x = value / scale
    if up and x > 0:
        step = 10.0 ** (math.floor(math.log10(x)) - 2)
        x = math.ceil(x / step - 1e-6) * step
    return f"{x:,.0f} {unit}" if x >= 1000 else f"{x:.3g} {unit}"


def spoken_list(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(i) for i in items]
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


def parse_duration(text: str, what: str = "duration", allow_zero: bool = False, maximum: float = MAX_SECONDS) -> float:
    """'60s', '1.5m', '250ms', '2h' or a bare number of seconds -> seconds (> 0, or >= 0 if allow_zero)."""
    match = _DURATION.fullmatch(str(text).strip())
    if not match:
        raise InputError(f"{what} {shown(text)} is not a duration: write e.g. 60s, 1.5m, 250ms or 2h.")
    seconds = float(match.group(2)) * _SECONDS[match.group(3)]
    least = "of 0 or more" if allow_zero else "longer than zero"
    if match.group(1) == "-" and seconds != 0:
        raise InputError(f"{what} {shown(text)} is negative: give a time {least}, e.g. 60s.")
    if not seconds <= maximum:  # also inf: 1e309 does not fit in a float
        raise InputError(
            f"{what} {shown(text)} is too long: at most {maximum:,.0f} s ({maximum / 31_557_600:g} years)."
        )
    if seconds == 0 and not allow_zero:
        raise InputError(f"{what} {shown(text)} must be longer than zero.")
    return seconds


def parse_count(text: str, what: str = "image count", unit: str = "images", maximum: int | None = None) -> int:
    """'100000', '100_000', '100,000', '100k', '1.5M', '2G' -> a whole number >= 0 (and <= maximum)."""
    raw = str(text).strip()
    if re.fullmatch(r"[0-9]{1,3}([,_][0-9]{3})+", raw):  # thousands separators: 100,000 or 100_000
        raw = raw.replace(",", "").replace("_", "")
    match = _COUNT.fullmatch(raw)
    if not match:
        hint = " (use M for millions; m means minutes)" if raw.endswith("m") else ""
        raise InputError(f"{what} {shown(text)} is not a count{hint}: write e.g. 100000, 100k or 1.5M.")
    value = Decimal(match.group(2)) * _SCALE[match.group(3)]
    if match.group(1) == "-" and value != 0:
        raise InputError(f"{what} {shown(text)} is negative: give a whole number of {unit}, 0 or more.")
    if maximum is not None and value > maximum:
        raise InputError(f"{what} {shown(text)} is too large: perfmodel takes at most {maximum:,} {unit}.")
    if value != value.to_integral_value():
        raise InputError(f"{what} {shown(text)} is not a whole number of {unit}.")
    return int(value)


def parse_fraction(text: str, what: str = "margin") -> float:
    """'5%' or '0.05' -> 0.05, in [0, 1). A bare number above 1 is refused as ambiguous."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    number = raw[:-1].strip() if percent else raw
    if not re.fullmatch(rf"[-+]?{_NUMBER}", number):
        raise InputError(f"{what} {shown(text)} is not a percentage: write e.g. 5% or 0.05.")
    value = float(number) / 100 if percent else float(number)
    if value < 0:
        raise InputError(f"{what} {shown(text)} is negative: give a margin of 0% or more, e.g. 5%.")
    if not percent and value > 1:
        raise InputError(f"{what} {shown(text)} is ambiguous: write {raw}% for a percentage, or a fraction below 1.")
    if not value < 1:
        raise InputError(f"{what} {shown(text)} must be below 100%, e.g. 5%.")
    return value


_PER = {
    None: 1.0,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
}


def parse_rate(text: str, what: str = "`rate`") -> float:
    """'400/s', '20k/s', '1.5k/s', '24000/min', '2M/h' or a bare number (per second) -> requests/s (> 0)."""
    raw = str(text).strip()
    match = re.fullmatch(rf"({_NUMBER})\s*([kKM])?\s*(?:/\s*([a-z]+))?", raw)
    per = None if not match else match.group(3)
    if not match or per not in _PER:
        raise InputError(f"{what} {text!r} is not a rate: write e.g. 400/s, 20k/s, 1.5k/s or 24000/min.")
    value = float(match.group(1)) * _SCALE[match.group(2)] / _PER[per]
    if not math.isfinite(value):
        raise InputError(f"{what} {text!r} is too large a rate to compute with.")
    if value <= 0:
        raise InputError(f"{what} {text!r} must be more than zero requests per second.")
    return value


def parse_rates(text: str, what: str = "`rate`") -> tuple[float, ...]:
    """'50,100,200/s' (the last item's unit applies to bare numbers before it) or '50/s,1k/s' -> requests/s."""
    items = [item.strip() for item in str(text).split(",")]
    unit = re.search(r"/\s*[a-z]+$", items[-1]) if items and items[-1] else None
    rates = []
    for item in items:
        if not item:
            raise InputError(f"{what} {text!r} has an empty item: write e.g. 50,100,200/s.")
        bare = re.fullmatch(rf"{_NUMBER}\s*[kKM]?", item) is not None
        rates.append(parse_rate(item + unit.group(0) if bare and unit else item, what))
    return tuple(dict.fromkeys(rates))


def parse_percentile(text: str, what: str = "`percentile`") -> float:
    """'99', '99.9' or 'p99' -> 99.0: the share of requests, in percent, that must meet the objective."""
    stripped = str(text).strip().lower()
    raw = stripped.removeprefix("p").removesuffix("%")
    try:
        if not re.fullmatch(_NUMBER, raw):  # float() would also read '٣', '1_0' or 'nan'
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise InputError(f"{what} {shown(text)} is not a percentile: write e.g. 99, 99.9 or 50.") from None
    if not (math.isfinite(value) and 0 < value < 100):
        raise InputError(f"{what} {shown(text)} must lie strictly between 0 and 100, e.g. 99.")
    if value < 1 and not stripped.endswith("%"):  # 0.99 is a fraction meant as the 99th, or 0.99 % meant so
        raise InputError(
            f"{what} {shown(text)} is in percent, so it would be the {value:g}th percentile: write {value * 100:g} "
            f"for the {value * 100:g}th, or {shown(stripped + '%')} if the {value:g}th is meant."
        )
    return value


def _pairs(text: str, what: str, example: str) -> list[tuple[str, str]]:
    pairs = []
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{what} {shown(text)}: {shown(item.strip())} is not KEY=VALUE; write e.g. {example}.")
        pairs.append((key.strip(), value.strip()))
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise InputError(f"{what} {shown(text)} names {spoken_list(repeated)} twice.")
    return pairs


def _name(key: str, what: str) -> str:
    if not GPU_TYPE_NAME.fullmatch(key):
        raise InputError(f"{what}: {shown(key)} is not a GPU type name (letters, digits, '_', '-', '.').")
    return key


def parse_pool(text: str, maximum: int | None = None) -> dict[str, int]:
    """'h100=8,a100=4' -> {'h100': 8, 'a100': 4}; a count may be 0 (and at most `maximum`)."""
    return {
        _name(k, "`pool`"): parse_count(v, f"`pool` count for {k}", "GPUs", maximum)
        for k, v in _pairs(text, "`pool`", "h100=8,a100=4")
    }


def parse_prices(text: str) -> dict[str, float]:
    """'h100=2.5,a100=1.2' -> price per GPU-hour for each type (0 to MAX_PRICE)."""
    prices = {}
    for k, v in _pairs(text, "`prices`", "h100=2.5,a100=1.2"):
        name = _name(k, "`prices`")
        price = float(v) if re.fullmatch(rf"[-+]?{_NUMBER}", v) else math.nan
        if not (0 <= price <= MAX_PRICE):
            raise InputError(
                f"`prices` for {name}: {shown(v)} is not a price per GPU-hour (a number from 0 to {MAX_PRICE:,.0f})."
            )
        prices[name] = price
    return prices


def parse_input_size(text, what: str = "input size") -> int:
    try:
        return whole_number(str(text), what, low=1, high=MAX_INPUT_SIZE)
    except InputError:
        raise InputError(
            f"{what} {shown(text)} is not an image side in pixels (a whole number from 1 to "
            f"{MAX_INPUT_SIZE:,}, e.g. 224)."
        ) from None


def parse_mix(text: str, images: int | None = None, maximum: int | None = None) -> dict[int, int]:
    """'224=70000,512=30000' (counts), or '224=70%,512=30%' of `images` -> {input size: images}."""
    pairs = [(parse_input_size(k, "`mix` input size"), v) for k, v in _pairs(text, "`mix`", "224=70000,512=30000")]
    percents = [v.endswith("%") for _, v in pairs]
    if not any(percents):
        counts = {size: parse_count(v, f"`mix` count for {size} px", maximum=maximum) for size, v in pairs}
        if images is not None and sum(counts.values()) != images:
            raise InputError(f"`mix` adds up to {sum(counts.values()):,} images, but `images` says {images:,}.")
        return counts
    if not all(percents):
        raise InputError(f"`mix` {shown(text)} mixes counts and percentages; use one or the other.")
    if images is None:
        raise InputError("`mix` in percentages needs `images`: the total the percentages share.")
    shares = [_percentage(v[:-1]) for _, v in pairs]
    if any(s is None for s in shares) or sum(shares) != 100:
        raise InputError(f"`mix` {shown(text)}: the percentages must be numbers from 0 to 100 that add up to 100%.")
    exact = [images * s / 100 for s in shares]
    counts = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))[: images - sum(counts)]:
        counts[i] += 1  # largest remainder: the counts add up to exactly `images`
    return {size: n for (size, _), n in zip(pairs, counts)}


def _percentage(text: str) -> Decimal | None:
    """A share from 0 to 100 as an exact Decimal, or None (checked first, so Decimal never sees 1e999999999)."""
    text = text.strip()
    if not re.fullmatch(_NUMBER, text) or float(text) > 100:
        return None
    return Decimal(text)
