"""Scenario validation: bad input names the file, the field and what is allowed."""
import pytest

from harness.config import ConfigError, load_scenario, parse_override
from harness.files.paths import SCENARIOS_DIR

MINIMAL = """
name = "t"
[producers]
rate = { kind = "constant", eps = 100 }
"""


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


def test_every_shipped_scenario_validates():
    names = [p.stem for p in SCENARIOS_DIR.glob("*.toml")]
    assert "steady" in names
    for name in names:
        scenario, _, _ = load_scenario(name)
        assert scenario.name == name


def test_minimal_scenario_gets_defaults(tmp_path):
    s, _, _ = load_scenario(write(tmp_path, MINIMAL))
    assert s.stream.partitions == 8 and s.spark.master == "local[2]" and s.backend.mode == "embedded"


@pytest.mark.parametrize("text,field,allowed", [
    (MINIMAL + "[stream]\npartitons = 4\n", "stream.partitons", "allowed: name, partitions, config"),
    (MINIMAL.replace("eps = 100", "eps = -5"), "producers.rate", "greater than or equal to 0"),
    (MINIMAL + "[stream]\npartitions = \"many\"\n", "stream.partitions", "integer"),
    (MINIMAL + "[spark.source_options]\nmaxOffsetPerTrigger = 10\n", "spark.source_options",
     "maxOffsetsPerTrigger"),
    (MINIMAL + "[spark]\nmaster = \"mesos://m:5050\"\n", "spark.master", "spark://host:port"),
    (MINIMAL + "[backend]\nmode = \"external\"\n", "backend", "bootstrap_servers"),
    (MINIMAL + "[spark]\ntrigger = { kind = \"processingTime\", interval = \"1s\" }\n", "spark.trigger.interval",
     "allowed: weeks, days, hours, minutes, seconds"),
    (MINIMAL + "[spark]\ntrigger = { interval = \"2 months\" }\n", "spark.trigger.interval", "month or year"),
])
def test_bad_input_names_file_field_and_allowed(tmp_path, text, field, allowed):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    msg = str(err.value)
    assert path in msg and field in msg and allowed in msg, msg


def test_overrides_are_toml_values(tmp_path):
    assert parse_override("producers.rate.eps=5000") == (["producers", "rate", "eps"], 5000)
    assert parse_override("spark.master=local[1]") == (["spark", "master"], "local[1]")
    assert parse_override('spark.trigger.interval="2 seconds"') == (["spark", "trigger", "interval"], "2 seconds")
    s, _, _ = load_scenario(write(tmp_path, MINIMAL), ["producers.duration_s=5", "stream.partitions=3"])
    assert s.producers.duration_s == 5 and s.stream.partitions == 3
    with pytest.raises(ConfigError, match="expected dotted.key=value"):
        parse_override("nonsense")


@pytest.mark.parametrize("text,path,value", [
    # TOML's own quoting of a dotted key: a quoted segment keeps its dots
    ('spark.conf."spark.sql.shuffle.partitions"=4', ["spark", "conf", "spark.sql.shuffle.partitions"], 4),
    ("spark.conf.'spark.sql.shuffle.partitions'=4", ["spark", "conf", "spark.sql.shuffle.partitions"], 4),  # literal
    ('spark.source_options."kafka.group.id".x=a', ["spark", "source_options", "kafka.group.id", "x"], "a"),
    ('a."b.c".d."e f"=1', ["a", "b.c", "d", "e f"], 1),  # bare and quoted mixed
    ("a.'b\\c'=1", ["a", "b\\c"], 1),  # a literal key keeps its backslash
    ('a."b\\"c"=1', ["a", 'b"c'], 1),  # a basic key's escape
    ('spark.conf."x=y"=2', ["spark", "conf", "x=y"], 2),  # an `=` inside quotes is the key's
    (' producers . rate . eps = 5', ["producers", "rate", "eps"], 5),  # spaces around dots, as TOML allows
    ('faults."0".at_s=3', ["faults", "0", "at_s"], 3),
])
def test_set_keys_are_read_as_toml_reads_dotted_keys(text, path, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize("text,problem", [
    ('spark.conf."spark.sql=4', "Unterminated string"),
    ("spark.conf.'spark.sql=4", 'Expected "\'" (at end of document)'),  # TOML's words for an unclosed literal
    ("a..b=1", "Invalid initial character"),
    ("a b=1", "Expected '='"),
    ("=1", "Invalid statement"),
])
def test_a_malformed_set_key_is_refused_naming_it(text, problem):
    with pytest.raises(ConfigError) as err:
        parse_override(text)
    key = text.split("=")[0]
    assert f"--set {text!r}: the key {key!r} is not a dotted key as TOML reads it" in str(err.value)
    assert problem in str(err.value) and 'spark.conf."spark.sql.shuffle.partitions"=8' in str(err.value)


def test_a_quoted_option_name_reaches_its_option_table(tmp_path):
    s, _, _ = load_scenario(write(tmp_path, MINIMAL), ['spark.conf."spark.sql.shuffle.partitions"=4',
                                                        "spark.source_options.'maxOffsetsPerTrigger'=100"])
    assert s.spark.conf == {"spark.sql.shuffle.partitions": 4}
    assert s.spark.source_options == {"maxOffsetsPerTrigger": 100}


def test_unknown_scenario_name_lists_known_ones():
    with pytest.raises(ConfigError, match="known: .*steady"):
        load_scenario("no-such-scenario")


def test_replay_csv_is_relative_to_the_scenario_and_checked_at_load(tmp_path):
    (tmp_path / "shape.csv").write_text("t,rate\n0,100\n10,300\n")
    text = MINIMAL.replace('rate = { kind = "constant", eps = 100 }', 'rate = { kind = "replay", csv = "shape.csv" }')
    s, _, _ = load_scenario(write(tmp_path, text))
    assert s.producers.rate.csv == (tmp_path / "shape.csv").resolve()
    (tmp_path / "shape.csv").write_text("t,rate\n0,100\n0,300\n")  # t must increase
    with pytest.raises(ConfigError, match=r"s\.toml: producers\.rate: .*shape\.csv"):
        load_scenario(write(tmp_path, text))


@pytest.mark.parametrize("scenario, override, message", [
    # issue 31 item 10: these passed `harness validate` and were refused only when the emulator or Spark started
    ("eh-steady", "stream.config.MaxEventsPerPartition=-1",
     "stream.config: MaxEventsPerPartition: must be an integer between 1 and 1000000000, got -1"),
    ("eh-steady", "stream.config.MaxEventsPerPartition='abc'", "MaxEventsPerPartition: must be an integer"),
    ("eh-steady", "stream.config.MaxEventsPerPartition=0", "got 0"),
    ("eh-steady", "stream.config.RetentionSeconds=-5", "RetentionSeconds"),
    ("steady", 'spark.master="local[0]"', "spark.master: not a master this harness can run on"),
    ("steady", 'spark.master="local-cluster[0,1,1024]"', "spark.master: not a master this harness can run on"),
    ("steady", 'spark.master="local-cluster[2,1,256]"', "local-cluster's M is each executor's memory in MB: at "
                                                         "least 450"),
])
def test_settings_refused_at_start_are_refused_at_load(scenario, override, message):
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario, [override])
    assert message in str(err.value)


def test_hub_settings_the_emulator_takes_still_load():
    s, _, _ = load_scenario("eh-steady", ["stream.config.MaxEventsPerPartition=5000",
                                          "stream.config.RetentionSeconds=30"])
    assert s.stream.config == {"MaxEventsPerPartition": 5000, "RetentionSeconds": 30}
