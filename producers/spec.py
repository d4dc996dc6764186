"""Scenario-file sections for traffic generation: keys, rate shape, payloads.

All models are pydantic v2, ``extra="forbid"`` and ``strict`` (no silent
"100" -> 100 coercion; ints are accepted where floats are expected).  Unions
are discriminated on ``kind`` so a validation error's ``loc`` names the
variant, e.g. ``('rate', 'burst', 'period_s')``; :func:`format_validation_error`
renders such errors as ``file: rate.burst.period_s: <what is allowed>``.

Rates are in events per second, times in seconds since the start of traffic.
Every shape is validated so that its rate can never be negative.
"""

from __future__ import annotations

import math
import string
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

__all__ = [
    "KeysSpec",
    "UniformKeys",
    "ZipfKeys",
    "HotPartitionKeys",
    "SequentialKeys",
    "NoKeys",
    "DEFAULT_KEYS",
    "RateSpec",
    "ConstantRate",
    "Step",
    "StepsRate",
    "BurstRate",
    "RampRate",
    "SineRate",
    "SpikeRate",
    "ReplayRate",
    "SumRate",
    "Phase",
    "SequenceRate",
    "PayloadSpec",
    "SizeSpec",
    "FixedSize",
    "UniformSize",
    "WeightedSize",
    "HeadersSpec",
    "MAX_PAYLOAD_BYTES",
    "format_validation_error",
]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# Finite, non-negative float (rates) and finite positive float (durations).
Eps = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PosSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegSeconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]

_KEY_PREFIX_CHARS = set(string.ascii_letters + string.digits + "-_.:/#@")
def _check_prefix(v: str) -> str:
    bad = sorted(set(v) - _KEY_PREFIX_CHARS)
    if bad:
        raise ValueError(f"prefix may only use ASCII letters, digits and '-_.:/#@'; got {''.join(bad)!r}")
    return v


KeyPrefix = Annotated[str, Field(max_length=64), AfterValidator(_check_prefix)]


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------

MAX_KEYS = 10_000_000


class UniformKeys(_Spec):
    """Keys ``{prefix}0 .. {prefix}{count-1}``, each equally likely."""

    kind: Literal["uniform"] = Field(description='uniform: every key equally likely')
    count: Annotated[int, Field(gt=0, le=MAX_KEYS)] = Field(1000, description='how many distinct keys')
    prefix: KeyPrefix = Field("k", description="the keys' common prefix ({prefix}0, {prefix}1, ...)")


class ZipfKeys(_Spec):
    """Bounded Zipf over ``count`` keys: rank r (1-based) has weight ``1 / r**s``.

    Ranks map to key ids through a permutation seeded by ``shuffle_seed`` (the
    same in every producer process, so the global distribution is Zipf and the
    hot keys are not adjacent ids).
    """

    kind: Literal["zipf"] = Field(description='zipf: a few keys take most events (rank r has weight 1 / r**s)')
    count: Annotated[int, Field(gt=0, le=MAX_KEYS)] = Field(description='how many distinct keys')
    s: Annotated[float, Field(gt=0, le=50, allow_inf_nan=False)] = Field(description="the Zipf exponent: larger is "
                                                                                     "more skewed (1.0-1.5 is typical"
                                                                                     " of real traffic)")
    prefix: KeyPrefix = Field("k", description="the keys' common prefix")
    shuffle_seed: NonNegativeInt = Field(0, description="seeds which key id gets which rank, so the hot keys land on "
                                                        "different partitions")


class HotPartitionKeys(_Spec):
    """A ``share`` of events goes to the ``partitions`` listed (split evenly among
    them), carried by keys that hash to those partitions; the rest is spread over
    the other partitions.

    ``rest``: ``uniform`` = uniform over the first ``count`` key ids that hash to
    a non-hot partition (hashing decides the per-partition spread); ``even`` =
    ``count`` keys split over the non-hot partitions and each non-hot partition
    gets exactly ``(1 - share) / (P - H)`` of the traffic.

    ``assign``: ``key`` = the producer sends only the key and the client /
    service partitioner places it; ``explicit`` = the chooser also returns the
    partition so the producer can set it explicitly.
    """

    kind: Literal["hot_partitions"] = Field(description='hot_partitions: a share of events goes to chosen partitions')
    partitions: Annotated[list[NonNegativeInt], Field(min_length=1)] = Field(description="the hot partitions' numbers")
    share: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(description="the share of all events that"
                                                                                        " goes to the hot partitions "
                                                                                        "(0-1]")
    rest: Literal["uniform", "even"] = Field("uniform", description="how the other events spread: uniform over the "
                                                                    "keys, or even over the other partitions")
    count: Annotated[int, Field(gt=0, le=MAX_KEYS)] = Field(1000, description='how many distinct keys the rest uses')
    hot_keys_per_partition: Annotated[int, Field(gt=0, le=100_000)] = Field(
        16, description="distinct keys found that hash to each hot partition")
    assign: Literal["key", "explicit"] = Field("key", description="key: send only the key and let the partitioner "
                                                                  "place it (as production does); explicit: also name"
                                                                  " the partition")
    prefix: KeyPrefix = Field("k", description="the keys' common prefix")

    @field_validator("partitions")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("partitions must not repeat")
        return v


class SequentialKeys(_Spec):
    """Keys ``{prefix}0 .. {prefix}{count-1}`` round-robin, in order."""

    kind: Literal["sequential"] = Field(description='sequential: keys in turn, 0 to count-1, then again')
    count: Annotated[int, Field(gt=0, le=MAX_KEYS)] = Field(description='how many distinct keys')
    prefix: KeyPrefix = Field("k", description="the keys' common prefix")


class NoKeys(_Spec):
    """No key: the producer's partitioner (or the service) spreads events."""

    kind: Literal["none"] = Field(description='none: events without a key')


KeysSpec = Annotated[
    Union[UniformKeys, ZipfKeys, HotPartitionKeys, SequentialKeys, NoKeys],
    Field(discriminator="kind"),
]

DEFAULT_KEYS = UniformKeys(kind="uniform", count=1000)


# ---------------------------------------------------------------------------
# Rates
# ---------------------------------------------------------------------------


class ConstantRate(_Spec):
    kind: Literal["constant"] = Field(description='constant: the same rate throughout')
    eps: Eps = Field(description='events per second')


class Step(_Spec):
    at_s: NonNegSeconds = Field(description="seconds from the start when this step's rate begins")
    eps: Eps = Field(description='events per second from then on')


class StepsRate(_Spec):
    """Piecewise constant: from ``at_s`` the rate is ``eps`` until the next step.

    The rate is 0 before the first step; ``at_s`` must strictly increase.
    """

    kind: Literal["steps"] = Field(description='steps: a piecewise constant rate')
    steps: Annotated[list[Step], Field(min_length=1)] = Field(description='the steps, in increasing at_s')

    @field_validator("steps")
    @classmethod
    def _increasing(cls, v: list[Step]) -> list[Step]:
        for i in range(1, len(v)):
            if not v[i].at_s > v[i - 1].at_s:
                raise ValueError(
                    f"steps[{i}].at_s ({v[i].at_s}) must be greater than steps[{i - 1}].at_s ({v[i - 1].at_s})"
                )
        return v


class BurstRate(_Spec):
    """``base_eps``, multiplied by ``factor`` during ``[offset_s + k*period_s,
    offset_s + k*period_s + duration_s)`` for k = 0, 1, ...  (``duration_s`` may be
    sub-second; ``factor`` 0 gives periodic pauses)."""

    kind: Literal["burst"] = Field(description='burst: a base rate with periodic bursts')
    base_eps: Eps = Field(description='events per second between bursts')
    period_s: PosSeconds = Field(description="seconds from one burst's start to the next's")
    duration_s: PosSeconds = Field(description='how long each burst lasts, seconds (at most period_s)')
    factor: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(description="the rate during a burst as a "
                                                                                   "multiple of base_eps")
    offset_s: NonNegSeconds = Field(0.0, description='seconds before the first burst')

    @field_validator("duration_s")
    @classmethod
    def _fits(cls, v: float, info: ValidationInfo) -> float:
        period = info.data.get("period_s")
        if period is not None and v > period:
            raise ValueError(f"duration_s ({v}) must be <= period_s ({period})")
        return v


class RampRate(_Spec):
    """Linear from ``from_eps`` to ``to_eps`` over ``duration_s``, then holds ``to_eps``."""

    kind: Literal["ramp"] = Field(description='ramp: a rate changing linearly')
    from_eps: Eps = Field(description='events per second at the start')
    to_eps: Eps = Field(description='events per second at duration_s and after')
    duration_s: PosSeconds = Field(description='seconds the ramp takes')


class SineRate(_Spec):
    """``mean_eps + amplitude_eps * sin(2*pi*(t + phase_s) / period_s)``;
    ``amplitude_eps <= mean_eps`` so the rate never goes negative."""

    kind: Literal["sine"] = Field(description='sine: a rate that swings around a mean')
    mean_eps: Eps = Field(description='the mean events per second')
    amplitude_eps: Eps = Field(description='how far above and below the mean it swings (at most mean_eps)')
    period_s: PosSeconds = Field(description='seconds per full swing')
    phase_s: Annotated[float, Field(allow_inf_nan=False)] = Field(0.0, description='seconds the sine is shifted by')

    @field_validator("amplitude_eps")
    @classmethod
    def _nonneg(cls, v: float, info: ValidationInfo) -> float:
        mean = info.data.get("mean_eps")
        if mean is not None and v > mean:
            raise ValueError(f"amplitude_eps ({v}) must be <= mean_eps ({mean}) so the rate stays >= 0")
        return v


class SpikeRate(_Spec):
    """``base_eps`` except ``eps`` during ``[at_s, at_s + duration_s)``."""

    kind: Literal["spike"] = Field(description='spike: one burst on a base rate')
    base_eps: Eps = Field(description='events per second outside the spike')
    at_s: NonNegSeconds = Field(description='seconds from the start when the spike begins')
    duration_s: PosSeconds = Field(description='how long the spike lasts, seconds')
    eps: Eps = Field(description='events per second during the spike')


class ReplayRate(_Spec):
    """Rate replayed from a CSV of ``t,rate`` rows (seconds, events/s).

    * An optional header row is skipped; blank lines and ``#`` comments too.
    * ``t`` must strictly increase; times are shifted so the first row is t=0.
    * ``interpolation``: ``linear`` (piecewise linear between rows) or ``step``
      (each row's rate holds until the next row).
    * ``after``: past the last row, ``hold`` its rate or drop to ``zero``.
    * ``scale`` multiplies every rate.
    * A relative ``csv`` path is resolved by the caller (``make_rate(base_dir=...)``).
    """

    kind: Literal["replay"] = Field(description='replay: the rate recorded in a CSV file (seconds, events per second)')
    csv: Annotated[Path, Field(strict=False)] = Field(description='the CSV file, relative to the scenario file')
    interpolation: Literal["linear", "step"] = Field("linear", description="between rows: linear, or step (each row's"
                                                                           " rate until the next)")
    after: Literal["hold", "zero"] = Field("hold", description='past the last row: hold its rate, or zero')
    scale: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(1.0, description='every rate multiplied by this')


class SumRate(_Spec):
    """Pointwise sum of ``parts`` (e.g. a constant base plus a burst)."""

    kind: Literal["sum"] = Field(description='sum: several rates added together')
    parts: Annotated[list["RateSpec"], Field(min_length=1)] = Field(description='the rates to add')


class Phase(_Spec):
    """One phase of a sequence: ``rate`` runs on phase-local time for ``duration_s``
    (``None`` = forever; only the last phase may be open-ended)."""

    duration_s: PosSeconds | None = Field(None, description="seconds this phase lasts (none: for ever; only the last "
                                                            "phase)")
    rate: "RateSpec" = Field(description="the phase's rate, on its own clock from 0")


class SequenceRate(_Spec):
    """Phases one after another, each with its own clock starting at 0.

    After the last phase (if it has a duration) the rate is 0; with ``repeat``
    the whole sequence loops forever (all phases then need a duration).
    """

    kind: Literal["sequence"] = Field(description='sequence: phases one after another')
    phases: Annotated[list[Phase], Field(min_length=1)] = Field(description='the phases, in order')
    repeat: bool = Field(False, description='loop the whole sequence for ever (every phase then needs a duration)')

    @field_validator("phases")
    @classmethod
    def _open_last(cls, v: list[Phase]) -> list[Phase]:
        for i, ph in enumerate(v[:-1]):
            if ph.duration_s is None:
                raise ValueError(f"phases[{i}].duration_s is required (only the last phase may be open-ended)")
        return v

    @field_validator("repeat")
    @classmethod
    def _repeat_needs_durations(cls, v: bool, info: ValidationInfo) -> bool:
        phases = info.data.get("phases")
        if v and phases and phases[-1].duration_s is None:
            raise ValueError(f"repeat needs every phase to have duration_s (phases[{len(phases) - 1}] has none)")
        return v


RateSpec = Annotated[
    Union[ConstantRate, StepsRate, BurstRate, RampRate, SineRate, SpikeRate, ReplayRate, SumRate, SequenceRate],
    Field(discriminator="kind"),
]

SumRate.model_rebuild()
Phase.model_rebuild()
SequenceRate.model_rebuild()


# ---------------------------------------------------------------------------
# Payloads
# ---------------------------------------------------------------------------

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
PayloadBytes = Annotated[int, Field(gt=0, le=MAX_PAYLOAD_BYTES)]


class FixedSize(_Spec):
    kind: Literal["fixed"] = Field(description='fixed: every payload the same size')
    bytes: PayloadBytes = Field(description="the payload's size in bytes")


class UniformSize(_Spec):
    """Uniform integer size in ``[min_bytes, max_bytes]`` (inclusive)."""

    kind: Literal["uniform"] = Field(description='uniform: sizes drawn evenly between two bounds')
    min_bytes: PayloadBytes = Field(description='the smallest payload, bytes')
    max_bytes: PayloadBytes = Field(description='the largest payload, bytes')

    @field_validator("max_bytes")
    @classmethod
    def _order(cls, v: int, info: ValidationInfo) -> int:
        lo = info.data.get("min_bytes")
        if lo is not None and v < lo:
            raise ValueError(f"max_bytes ({v}) must be >= min_bytes ({lo})")
        return v


class WeightedSize(_Spec):
    """``sizes[i]`` with probability ``weights[i] / sum(weights)``."""

    kind: Literal["weighted"] = Field(description='weighted: sizes drawn from a list with weights')
    sizes: Annotated[list[PayloadBytes], Field(min_length=1)] = Field(description='the payload sizes, bytes')
    weights: Annotated[list[Annotated[float, Field(ge=0, allow_inf_nan=False)]], Field(min_length=1)] = Field(
        description="each size's relative weight")

    @field_validator("weights")
    @classmethod
    def _match(cls, v: list[float], info: ValidationInfo) -> list[float]:
        sizes = info.data.get("sizes")
        if sizes is not None and len(v) != len(sizes):
            raise ValueError(f"weights needs one entry per size ({len(sizes)} sizes, {len(v)} weights)")
        if not sum(v) > 0 or not math.isfinite(sum(v)):
            raise ValueError("weights must have a positive finite sum")
        return v


SizeSpec = Annotated[Union[FixedSize, UniformSize, WeightedSize], Field(discriminator="kind")]

_HEADER_NAME_CHARS = set(string.ascii_letters + string.digits + "-_.")


class HeadersSpec(_Spec):
    """Extra headers on every event: the ``fixed`` name/value pairs, then
    ``random`` headers named ``h0 .. h{random-1}`` whose values are
    ``value_bytes`` random printable ASCII characters (fresh per event)."""

    fixed: dict[str, str] = Field(default_factory=dict, description='header name -> value on every event')
    random: Annotated[int, Field(ge=0, le=64)] = Field(0, description='how many headers with random values besides')
    value_bytes: Annotated[int, Field(gt=0, le=4096)] = Field(8, description="each random header value's size, bytes")

    @field_validator("fixed")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not name or set(name) - _HEADER_NAME_CHARS:
                raise ValueError(f"header name {name!r} must be non-empty ASCII letters, digits or '-_.'")
        return v


class PayloadSpec(_Spec):
    """Event payloads: ``size`` distribution, ``content`` and extra ``headers``.

    ``content``: ``random`` = random printable ASCII (incompressible: ~6 bits of
    entropy per byte); ``compressible`` = repetitive text (compresses >10x).
    """

    size: SizeSpec = Field(
        default_factory=lambda: FixedSize(kind="fixed", bytes=1024), description="the payload's size: fixed, uniform "
                                                                                 "or weighted")
    content: Literal["compressible", "random"] = Field("random", description="random: incompressible printable text; "
                                                                             "compressible: text a codec shrinks")
    headers: HeadersSpec = Field(default_factory=HeadersSpec, description='extra headers on every event')


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def field_path(loc: tuple) -> str:
    """``('rate', 'steps', 0, 'at_s')`` -> ``rate.steps[0].at_s``; pydantic's validator wrappers are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).startswith("function-"):
            out += ("." if out else "") + str(part)
    return out or "<root>"


def error_message(e: dict) -> str:
    msg = e.get("msg", "invalid")
    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg


def format_validation_error(err: ValidationError, file: str | Path | None = None, prefix: str = "") -> list[str]:
    """Render a pydantic ``ValidationError`` as ``file: field.path: message`` lines.

    ``prefix`` is prepended to every field path (e.g. ``"traffic."`` when these
    models are embedded in a larger config).  The discriminator tag appears in
    the path (``rate.burst.period_s``) which tells which variant was checked.
    """
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e.get("loc", ()))
        if prefix:
            path = prefix.rstrip(".") + ("" if not loc or isinstance(loc[0], int) else ".") + (
                field_path(loc) if loc else ""
            )
        else:
            path = field_path(loc)
        msg = error_message(e)
        lines.append(f"{file}: {path}: {msg}" if file is not None else f"{path}: {msg}")
    return lines
