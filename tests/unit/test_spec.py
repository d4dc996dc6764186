"""Spec validation: accepted forms and errors that name the field."""

from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from harness.producers.spec import (
    DEFAULT_KEYS,
    BurstRate,
    HotPartitionKeys,
    KeysSpec,
    PayloadSpec,
    RateSpec,
    ReplayRate,
    SequenceRate,
    SumRate,
    ZipfKeys,
    format_validation_error,
)

RATE = TypeAdapter(RateSpec)
KEYS = TypeAdapter(KeysSpec)


class Scenario(BaseModel):
    """How the lead's config embeds these sections."""

    keys: KeysSpec = DEFAULT_KEYS
    rate: RateSpec
    payload: PayloadSpec = PayloadSpec()


def errors(fn, data, **kw):
    with pytest.raises(ValidationError) as ei:
        fn(data)
    return format_validation_error(ei.value, **kw)


def test_scenario_embedding_and_defaults():
    s = Scenario.model_validate({"rate": {"kind": "constant", "eps": 10}})
    assert s.keys.kind == "uniform" and s.keys.count == 1000
    assert s.payload.size.kind == "fixed" and s.payload.size.bytes == 1024
    assert s.payload.content == "random" and s.payload.headers.random == 0
    again = Scenario.model_validate(s.model_dump(mode="json"))
    assert again == s


def test_nested_composition_parses():
    r = RATE.validate_python({
        "kind": "sequence", "repeat": True,
        "phases": [
            {"duration_s": 10, "rate": {"kind": "sum", "parts": [
                {"kind": "constant", "eps": 100},
                {"kind": "burst", "base_eps": 50, "period_s": 2, "duration_s": 0.1, "factor": 4}]}},
            {"duration_s": 5, "rate": {"kind": "ramp", "from_eps": 100, "to_eps": 0, "duration_s": 5}},
        ],
    })
    assert isinstance(r, SequenceRate) and isinstance(r.phases[0].rate, SumRate)
    assert isinstance(r.phases[0].rate.parts[1], BurstRate)


def test_replay_takes_a_path():
    r = RATE.validate_python({"kind": "replay", "csv": "data/rates.csv"})
    assert isinstance(r, ReplayRate) and r.csv == Path("data/rates.csv")
    assert r.interpolation == "linear" and r.after == "hold"


@pytest.mark.parametrize(
    "data,path,fragment",
    [
        ({"kind": "constant", "eps": -1}, "rate.constant.eps", "greater than or equal to 0"),
        ({"kind": "constant", "eps": "100"}, "rate.constant.eps", "valid number"),
        ({"kind": "constant", "eps": 5, "burst": 1}, "rate.constant.burst", "Extra inputs"),
        ({"kind": "burst", "base_eps": 1, "period_s": 1, "duration_s": 2, "factor": 2},
         "rate.burst.duration_s", "must be <= period_s"),
        ({"kind": "burst", "base_eps": 1, "period_s": 0, "duration_s": 0.1, "factor": 2},
         "rate.burst.period_s", "greater than 0"),
        ({"kind": "sine", "mean_eps": 10, "amplitude_eps": 11, "period_s": 5},
         "rate.sine.amplitude_eps", "must be <= mean_eps"),
        ({"kind": "ramp", "from_eps": 1, "to_eps": 2, "duration_s": 0}, "rate.ramp.duration_s", "greater than 0"),
        ({"kind": "steps", "steps": [{"at_s": 2, "eps": 1}, {"at_s": 1, "eps": 1}]},
         "rate.steps.steps", "steps[1].at_s"),
        ({"kind": "steps", "steps": []}, "rate.steps.steps", "at least 1"),
        ({"kind": "spike", "base_eps": 1, "at_s": -1, "duration_s": 1, "eps": 9}, "rate.spike.at_s", ">= 0"),
        ({"kind": "sum", "parts": [{"kind": "constant", "eps": 1}, {"kind": "sine", "mean_eps": 1, "amplitude_eps": 2, "period_s": 1}]},
         "rate.sum.parts[1].sine.amplitude_eps", "mean_eps"),
        ({"kind": "sequence", "phases": [{"rate": {"kind": "constant", "eps": 1}}, {"duration_s": 1, "rate": {"kind": "constant", "eps": 1}}]},
         "rate.sequence.phases", "only the last phase"),
        ({"kind": "sequence", "repeat": True, "phases": [{"rate": {"kind": "constant", "eps": 1}}]},
         "rate.sequence.repeat", "duration_s"),
        ({"kind": "replay", "csv": "x.csv", "interpolation": "cubic"}, "rate.replay.interpolation", "'linear' or 'step'"),
        ({"kind": "warp", "eps": 1}, "rate", "does not match any of the expected tags"),
        ({"eps": 1}, "rate", "kind"),
    ],
)
def test_rate_errors_name_the_field(data, path, fragment):
    lines = errors(RATE.validate_python, data, file="scn.yaml", prefix="rate")
    assert any(line.startswith(f"scn.yaml: {path}: ") and fragment.replace(">= 0", "greater than or equal to 0") in line
               for line in lines), lines


@pytest.mark.parametrize(
    "data,path,fragment",
    [
        ({"kind": "uniform", "count": 0}, "uniform.count", "greater than 0"),
        ({"kind": "zipf", "count": 10, "s": 0}, "zipf.s", "greater than 0"),
        ({"kind": "zipf", "count": 10}, "zipf.s", "Field required"),
        ({"kind": "hot_partitions", "partitions": [], "share": 0.5}, "hot_partitions.partitions", "at least 1"),
        ({"kind": "hot_partitions", "partitions": [1, 1], "share": 0.5}, "hot_partitions.partitions", "must not repeat"),
        ({"kind": "hot_partitions", "partitions": [1], "share": 1.5}, "hot_partitions.share", "less than or equal to 1"),
        ({"kind": "hot_partitions", "partitions": [1], "share": 0}, "hot_partitions.share", "greater than 0"),
        ({"kind": "hot_partitions", "partitions": [-1], "share": 0.5}, "hot_partitions.partitions[0]", "greater than or equal to 0"),
        ({"kind": "hot_partitions", "partitions": [1], "share": 0.5, "rest": "zipf"}, "hot_partitions.rest", "'uniform' or 'even'"),
        ({"kind": "sequential", "count": 5, "prefix": "a b"}, "sequential.prefix", "prefix may only use"),
        ({"kind": "none", "count": 5}, "none.count", "Extra inputs"),
        ({"kind": "uniform", "count": True}, "uniform.count", "valid integer"),
    ],
)
def test_keys_errors_name_the_field(data, path, fragment):
    lines = errors(KEYS.validate_python, data)
    assert any(line.startswith(f"{path}: ") and fragment in line for line in lines), lines


@pytest.mark.parametrize(
    "data,path,fragment",
    [
        ({"size": {"kind": "fixed", "bytes": 0}}, "size.fixed.bytes", "greater than 0"),
        ({"size": {"kind": "uniform", "min_bytes": 10, "max_bytes": 5}}, "size.uniform.max_bytes", ">= min_bytes"),
        ({"size": {"kind": "weighted", "sizes": [1, 2], "weights": [1.0]}}, "size.weighted.weights", "one entry per size"),
        ({"size": {"kind": "weighted", "sizes": [1], "weights": [0.0]}}, "size.weighted.weights", "positive finite sum"),
        ({"content": "zeros"}, "content", "'compressible' or 'random'"),
        ({"headers": {"random": -1}}, "headers.random", "greater than or equal to 0"),
        ({"headers": {"fixed": {"bad name": "x"}}}, "headers.fixed", "header name"),
        ({"headers": 3}, "headers", "valid dictionary or instance"),
    ],
)
def test_payload_errors_name_the_field(data, path, fragment):
    lines = errors(PayloadSpec.model_validate, data, file=Path("s.toml"), prefix="payload")
    assert any(line.startswith(f"s.toml: payload.{path}: ") and fragment in line for line in lines), lines


def test_embedded_error_paths_are_full():
    with pytest.raises(ValidationError) as ei:
        Scenario.model_validate({"rate": {"kind": "constant", "eps": 1}, "keys": {"kind": "zipf", "count": 5, "s": -1}})
    assert format_validation_error(ei.value, "f.yaml") == ["f.yaml: keys.zipf.s: Input should be greater than 0"]


def test_model_classes_parse_directly():
    assert ZipfKeys(kind="zipf", count=3, s=0.5).shuffle_seed == 0
    h = HotPartitionKeys(kind="hot_partitions", partitions=[0], share=1)
    assert h.rest == "uniform" and h.assign == "key" and h.hot_keys_per_partition == 16
