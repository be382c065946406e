"""The modes a schedule is made and run with, as enums checked in one place.

Each enum is ``str``-valued: a member equals, formats and serialises (JSON, CSV) as its plain value, so call sites
that pass ``"waste"`` or ``"sync"`` keep working and documents keep their keys. ``X.parse(value)`` is the one check:
it returns the member or raises ``InputError`` naming the setting, the choices and the bad value.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from kdvfs.errors import InputError

__all__ = ["Granularity", "Mechanism", "Objective", "Policy", "Scope"]

_M = TypeVar("_M", bound="_Mode")


class _Mode(str, Enum):
    """A string-valued mode; ``str()`` and f-strings give the value (Python 3.11 would give ``Class.MEMBER``)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str(self), format_spec)

    @classmethod
    def what(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)

    @classmethod
    def parse(cls: type[_M], value: object) -> _M:
        """The member whose value is ``value`` (a member passes through); ``InputError`` otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise InputError(f"{cls.what()} {value!r} is not one of {', '.join(cls.values())}") from None


class Objective(_Mode):
    """What the optimiser minimises: energy within a time bound (``waste``), E·T, E·T², or energy alone."""

    WASTE = "waste"
    EDP = "edp"
    ED2P = "ed2p"
    ENERGY = "energy"


class Granularity(_Mode):
    """How many settings a schedule may use: one for the whole iteration, one per pass, one per kernel."""

    STATIC = "static"
    PASS = "pass"
    KERNEL = "kernel"


class Scope(_Mode):
    """Whether the time bound holds per kernel (``local``) or for the whole iteration (``global``)."""

    LOCAL = "local"
    GLOBAL = "global"


class Mechanism(_Mode):
    """How a clock switch is issued: a host synchronisation, an in-stream host callback, or ahead of time."""

    SYNC = "sync"
    CALLBACK = "callback"
    PREDICTIVE = "predictive"


class Policy(_Mode):
    """Which schedule a comparison or what-if runs: the driver's (``auto``), the pass-level optimum, the kernel-level
    optimum with free switching (``ideal``) or with every switch paid for (``naive``), or one planned for the switch
    latency (``switch-aware``)."""

    AUTO = "auto"
    PASS = "pass"
    IDEAL = "ideal"
    NAIVE = "naive"
    SWITCH_AWARE = "switch-aware"
