"""What people type, parsed: durations (60s, 1.5m, 250ms, 2h), counts (100000, 100k, 1.5M), percentages
(5%, 0.05), GPU pools (h100=8,a100=4), input-size mixes (224=70000,512=30000 or 224=70%,512=30%),
prices (h100=2.5), request rates (400/s, 20k/s, 24000/min) and percentiles (99, p99.9). Each parser
returns plain numbers or raises InputError with one sentence.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from perfmodel.errors import InputError

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_DURATION = re.compile(rf"^({_NUMBER})\s*(ms|s|sec|m|min|h|hr)?$")
_SECONDS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, None: 1.0}
_COUNT = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([kKMG])?$")
_SCALE = {None: 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def parse_duration(text: str, what: str = "duration", allow_zero: bool = False) -> float:
    """'60s', '1.5m', '250ms', '2h' or a bare number of seconds -> seconds (> 0, or >= 0 if allow_zero)."""
    match = _DURATION.match(str(text).strip())
    if not match:
        raise InputError(f"{what} {text!r} is not a duration: write e.g. 60s, 1.5m, 250ms or 2h.")
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise InputError(f"{what} {text!r} must be longer than zero.")
    return seconds


def parse_count(text: str, what: str = "image count") -> int:
    """'100000', '100_000', '100,000', '100k', '1.5M', '2G' -> a whole number >= 0."""
    raw = str(text).strip()
    if re.fullmatch(r"\d{1,3}([,_]\d{3})+", raw):  # thousands separators: 100,000 or 100_000
        raw = raw.replace(",", "").replace("_", "")
    match = _COUNT.match(raw)
    if not match:
        hint = " (use M for millions; m means minutes)" if raw.endswith("m") else ""
        raise InputError(f"{what} {text!r} is not a count{hint}: write e.g. 100000, 100k or 1.5M.")
    try:
        value = Decimal(match.group(1)) * _SCALE[match.group(2)]
    except InvalidOperation:
        raise InputError(f"{what} {text!r} is not a count: write e.g. 100000, 100k or 1.5M.") from None
    if value != value.to_integral_value():
        raise InputError(f"{what} {text!r} is not a whole number of images.")
    return int(value)


def parse_fraction(text: str, what: str = "margin") -> float:
    """'5%' or '0.05' -> 0.05, in [0, 1). A bare number above 1 is refused as ambiguous."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a percentage: write e.g. 5% or 0.05.") from None
    if not raw.endswith("%") and value > 1:
        raise InputError(f"{what} {text!r} is ambiguous: write {raw}% for a percentage, or a fraction below 1.")
    if not (math.isfinite(value) and 0 <= value < 1):
        raise InputError(f"{what} {text!r} must be at least 0% and below 100%.")
    return value


_PER = {None: 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
        "h": 3600.0, "hr": 3600.0, "hour": 3600.0}


def parse_rate(text: str, what: str = "--rate") -> float:
    """'400/s', '20k/s', '1.5k/s', '24000/min', '2M/h' or a bare number (per second) -> requests/s (> 0)."""
    raw = str(text).strip()
    match = re.fullmatch(rf"({_NUMBER})\s*([kKM])?\s*(?:/\s*([a-z]+))?", raw)
    per = None if not match else match.group(3)
    if not match or per not in _PER:
        raise InputError(f"{what} {text!r} is not a rate: write e.g. 400/s, 20k/s, 1.5k/s or 24000/min.")
    value = float(match.group(1)) * _SCALE[match.group(2)] / _PER[per]
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} {text!r} must be more than zero requests per second.")
    return value


def parse_rates(text: str, what: str = "--rate") -> tuple[float, ...]:
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


def parse_percentile(text: str, what: str = "--percentile") -> float:
    """'99', '99.9' or 'p99' -> 99.0: the share of requests, in percent, that must meet the objective."""
    raw = str(text).strip().lower().removeprefix("p").removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a percentile: write e.g. 99, 99.9 or 50.") from None
    if not (math.isfinite(value) and 0 < value < 100):
        raise InputError(f"{what} {text!r} must lie strictly between 0 and 100, e.g. 99.")
    return value


def _pairs(text: str, what: str, example: str) -> list[tuple[str, str]]:
    pairs = []
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{what} {text!r}: {item.strip()!r} is not KEY=VALUE; write e.g. {example}.")
        pairs.append((key.strip(), value.strip()))
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise InputError(f"{what} {text!r} names {', '.join(repeated)} twice.")
    return pairs


def _name(key: str, what: str) -> str:
    if not _NAME.match(key):
        raise InputError(f"{what}: {key!r} is not a GPU type name (letters, digits, '_', '-', '.').")
    return key


def parse_pool(text: str) -> dict[str, int]:
    """'h100=8,a100=4' -> {'h100': 8, 'a100': 4}; a count may be 0."""
    return {_name(k, "--pool"): parse_count(v, f"--pool count for {k}") for k, v in _pairs(text, "--pool", "h100=8,a100=4")}


def parse_prices(text: str) -> dict[str, float]:
    """'h100=2.5,a100=1.2' -> price per GPU-hour for each type (>= 0)."""
    prices = {}
    for k, v in _pairs(text, "--price", "h100=2.5,a100=1.2"):
        try:
            price = float(v)
        except ValueError:
            price = math.nan
        if not (math.isfinite(price) and price >= 0):
            raise InputError(f"--price for {k}: {v!r} is not a price per GPU-hour (a number >= 0).")
        prices[_name(k, "--price")] = price
    return prices


def parse_input_size(text, what: str = "input size") -> int:
    raw = str(text).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"{what} {text!r} is not an image side in pixels (a whole number >= 1, e.g. 224).")
    return int(raw)


def parse_mix(text: str, images: int | None = None) -> dict[int, int]:
    """'224=70000,512=30000' (counts), or '224=70%,512=30%' of `images` -> {input size: images}."""
    pairs = [(parse_input_size(k, "--mix input size"), v) for k, v in _pairs(text, "--mix", "224=70000,512=30000")]
    percents = [v.endswith("%") for _, v in pairs]
    if not any(percents):
        counts = {size: parse_count(v, f"--mix count for {size} px") for size, v in pairs}
        if images is not None and sum(counts.values()) != images:
            raise InputError(f"--mix adds up to {sum(counts.values()):,} images, but --images says {images:,}.")
        return counts
    if not all(percents):
        raise InputError(f"--mix {text!r} mixes counts and percentages; use one or the other.")
    if images is None:
        raise InputError("--mix in percentages needs --images: the total the percentages share.")
    shares = [Decimal(v[:-1]) if _is_number(v[:-1]) else None for _, v in pairs]
    if any(s is None or s < 0 for s in shares) or sum(shares) != 100:
        raise InputError(f"--mix {text!r}: the percentages must be numbers >= 0 that add up to 100%.")
    exact = [images * s / 100 for s in shares]
    counts = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))[: images - sum(counts)]:
        counts[i] += 1  # largest remainder: the counts add up to exactly `images`
    return {size: n for (size, _), n in zip(pairs, counts)}


def _is_number(text: str) -> bool:
    try:
        return Decimal(text).is_finite()
    except InvalidOperation:
        return False
