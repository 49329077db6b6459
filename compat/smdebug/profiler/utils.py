"""smdebug.profiler.utils: str2bool (rules parse their string parameters with it), TimeUnits and
the time helpers that analysis code imports."""
from __future__ import annotations

from sdlocal.evaluator.analysis.events import TimeUnits, human_time, parse_human_time, to_microseconds

_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "f", "false", "off", "0"})


def str2bool(v: object) -> bool:
    """True/False from a bool or from the strings distutils' strtobool knew (ValueError otherwise)."""
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"invalid truth value {v!r}")


def us_since_epoch_to_human_readable_time(us_since_epoch: float) -> str:
    """"2020-08-06T07:12:35:624000" (UTC)."""
    return human_time(int(us_since_epoch))


def ns_since_epoch_to_human_readable_time(ns_since_epoch: float) -> str:
    return human_time(int(ns_since_epoch) // 1000)


def convert_utc_timestamp_to_microseconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> int:
    return to_microseconds(timestamp, unit)


def convert_utc_datetime_to_microseconds(timestamp_datetime: object) -> int:
    return parse_human_time(timestamp_datetime)


__all__ = ["TimeUnits", "convert_utc_datetime_to_microseconds", "convert_utc_timestamp_to_microseconds",
           "ns_since_epoch_to_human_readable_time", "str2bool", "us_since_epoch_to_human_readable_time"]
