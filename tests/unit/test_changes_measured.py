"""What a change did, measured from a literal run directory (harness.analysis.changes), judged
(harness.checkers.changes) and put in a rehearsal's row (reports.rehearsal): the expected values written out by hand
from the files laid down here."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.analysis.changes import measure_changes
from harness.check import verdict_of
from harness.checkers.changes import change_in_force, change_restarted
from harness.commands.rehearse import ConfigError, build, load_rehearsal
from harness.reports.rehearsal import finding, rehearsal_md, row_of

AT = 1_800_000_000.0  # when the change was injected


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def offsets(run: Path, batch: int, conf: dict) -> None:
    path = run / "checkpoint" / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + "\n" +
                    json.dumps({"events": {"0": batch * 10}}) + "\n")


def record(changed: dict, was: dict | None = None, last: int = 4, **detail) -> dict:
    return {"kind": "change", "fault": 0, "n": 0, "injected_at": AT,
            "detail": {"inject_name": "the change", "inject_changed": changed, "inject_was": was or {},
                       "inject_at_stop": {"offset_log_last": last}, "inject_in_force": True,
                       "inject_refused_with": None, **{f"inject_{k}": v for k, v in detail.items()}}}


def progress(*rows_at: tuple[float, int]) -> list[dict]:
    return [{"batchId": i, "timestamp": stamp(t), "numInputRows": rows,
             "sources": [{"endOffset": {"events": {str(p): 1 for p in range(8)}}}]} for i, (t, rows) in
            enumerate(rows_at)]


def test_a_setting_the_checkpoint_pins_is_read_from_the_batches_planned_after_the_change(tmp_path):
    for batch in range(6):
        offsets(tmp_path, batch, {"spark.sql.shuffle.partitions": "4"})
    (c,) = measure_changes(tmp_path, [record({"conf": {"spark.sql.shuffle.partitions": "8"}})],
                           progress((AT - 5, 100), (AT + 13, 900)), {"state": "drained"})
    assert c["restarted"] and not c["refused"] and c["first_batch_after_s"] == 13.0 and c["batches_after"] == 1
    assert c["settings"] == [{"setting": "spark.sql.shuffle.partitions", "requested": "8", "in_force": "4",
                              "taken": False, "how": "the offset log of batch 5 (the checkpoint pins it: the old "
                                                     "value kept)"}]


def test_no_batch_after_the_change_and_a_failed_query_is_a_refusal(tmp_path):
    offsets(tmp_path, 4, {"spark.sql.shuffle.partitions": "4"})
    (c,) = measure_changes(tmp_path, [record({"query_params": [{}, {"group_by_partition": True}]})],
                           progress((AT - 5, 100)), {"state": "failed", "error": "[STATE_STORE_X] no"})
    assert (c["restarted"], c["refused"], c["first_batch_after_s"], c["settings"]) == (False, True, None, [])


@pytest.mark.parametrize("old, new, rows, taken, in_force", [
    (None, 1500, [1500, 1503], True, 1503),      # within the cap and Kafka's one record per partition read
    (None, 1500, [1500, 1510], False, 1510),     # above cap + 7
    ("500", "2000", [480, 500], None, None),     # a raised cap nothing reached: not told apart
    ("500", "2000", [1900, 500], True, 1900),
])
def test_a_batch_cap_is_in_force_when_no_batch_after_the_change_read_more(tmp_path, old, new, rows, taken,
                                                                            in_force):
    change = record({"source_options": {"maxOffsetsPerTrigger": str(new)}},
                    {"source_options": {"maxOffsetsPerTrigger": old}})
    (c,) = measure_changes(tmp_path, [change], progress(*[(AT + 10 + i, r) for i, r in enumerate(rows)]),
                           {"state": "drained"})
    (s,) = c["settings"]
    assert (s["taken"], s["in_force"]) == (taken, in_force)


def test_changelog_checkpointing_is_read_from_the_state_files_written_after_the_change(tmp_path):
    key = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    offsets(tmp_path, 5, {"spark.sql.shuffle.partitions": "4"})
    store = tmp_path / "checkpoint" / "state" / "0" / "0"
    store.mkdir(parents=True)
    for name, t in (("3.zip", AT - 10), ("6.changelog", AT + 20), ("7.changelog", AT + 22)):
        (store / name).write_bytes(b"x")
        os.utime(store / name, (t, t))
    (c,) = measure_changes(tmp_path, [record({"conf": {key: "true"}})], progress((AT + 15, 10)), {"state": "drained"})
    assert c["settings"][0]["taken"] is True and c["settings"][0]["in_force"] == "true"
    assert "2 changelogs, 0 snapshots" in c["settings"][0]["how"]


def view(changes):
    from tests.unit.test_checkers_literal import view as literal

    return literal(str(Path(__file__).resolve().parents[2] / "scenarios" / "rehearsals" / "bases" / "windowed.toml"),
                   changes=changes)


def change(**fields) -> dict:
    base = {"n": 0, "name": "x", "refused_with": None, "refused": False, "restarted": True,
            "first_batch_after_s": 9.0, "batches_after": 5, "spark": ["4.3.0", "4.3.0"], "settings": [],
            "in_force_expected": True}
    return {**base, **fields}


def setting(taken, in_force="4", requested="8") -> dict:
    return {"setting": "spark.sql.shuffle.partitions", "requested": requested, "in_force": in_force, "taken": taken,
            "how": "the offset log"}


def test_a_change_declared_refused_passes_only_when_refused():
    assert [c.status for c in change_restarted(view([change(refused_with="STATE_X", refused=True,
                                                            restarted=False)]))] == ["pass"]
    (check,) = change_restarted(view([change(refused_with="STATE_X")]))
    assert check.status == "fail" and "the query restarted and ran 5 batches" in check.detail
    (check,) = change_restarted(view([change(restarted=False, refused=True)]))
    assert check.status == "fail" and "did not run a batch after it (it failed)" in check.detail


def test_settings_in_force_are_judged_against_what_the_change_declares():
    assert change_in_force(view([change(settings=[setting(False)], in_force_expected=False)]))[0].status == "pass"
    (check,) = change_in_force(view([change(settings=[setting(False)])]))
    assert check.status == "fail" and "not taken ('4' in force), declared in force" in check.detail
    (check,) = change_in_force(view([change(settings=[setting(None)])]))
    assert check.status == "not required" and verdict_of([check]) == "pass"
    assert change_in_force(view([change()])) == []


@pytest.mark.parametrize("rule, restarted, eo, state, settings, expected", [
    ("allowed", True, "held", "carried", [], None),
    ("allowed", False, "held (up to the failure)", "-", [], "documented as allowed, yet Spark refused it"),
    ("allowed", True, "broken: 3 lost, 0 duplicated", "-", [], "documented as allowed, yet exactly-once broken"),
    ("not_allowed", False, "held (up to the failure)", "-", [], None),
    ("not_allowed", True, "held", "carried", [setting(False)],
     "documented as not allowed, yet Spark restarted and kept the checkpoint's spark.sql.shuffle.partitions "
     "silently"),
    ("not_allowed", True, "held", "carried", [setting(True)],
     "documented as not allowed, yet Spark restarted and took the change"),
    ("not_well_defined", True, "held", "not carried", [], "state not carried"),
    ("not_well_defined", False, "held", "-", [], None),
    (None, False, "held", "-", [], "Spark refused it"),
])
def test_a_finding_is_where_what_happened_differs_from_the_rule(rule, restarted, eo, state, settings, expected):
    assert finding(rule, restarted, eo, state, {"settings": settings}) == expected


def test_a_rehearsal_row_from_a_result_and_its_table_lists_findings_first(tmp_path):
    result = {"verdict": "pass", "query": {"final_state": "drained"}, "counts": {"lost": 0, "duplicates": 0},
              "checks": [{"name": n, "ok": True, "detail": ""} for n in ("drained", "oracle_window_counts",
                                                                          "state_matches")],
              "changes": [change(settings=[setting(False)], in_force_expected=False)]}
    shuffle = row_of("shuffle", tmp_path / "01-shuffle", result, {"rule": "not_allowed", "in_force": False})
    assert (shuffle["restarted"], shuffle["exactly_once"], shuffle["state"]) == (True, "held", "carried")
    assert shuffle["settings"] == "spark.sql.shuffle.partitions = 8 not taken (4 in force)"
    refused = {**result, "query": {"final_state": "failed", "error_class": "STATE_X"},
               "changes": [change(restarted=False, refused=True, refused_with="STATE_X")]}
    grouping = row_of("grouping", tmp_path / "00-grouping", refused, {"rule": "not_allowed",
                                                                       "refused_with": "STATE_X"})
    assert (grouping["refused_with"], grouping["exactly_once"], grouping["finding"]) == (
        "STATE_X", "held (up to the failure)", None)
    md = rehearsal_md({"rehearsal": "r", "base": "b", "verdict": "pass", "rows": [grouping, shuffle]})
    assert md.index("| shuffle |") < md.index("| grouping |")  # the finding first
    assert "refused: STATE_X" in md


def test_a_rehearsal_file_is_refused_naming_the_change(tmp_path):
    path = tmp_path / "r.toml"
    base = Path(__file__).resolve().parents[2] / "scenarios" / "rehearsals" / "bases" / "windowed.toml"
    path.write_text(f'name = "r"\nbase = "{base}"\n[[changes]]\nname = "a"\nspark = {{ master = "local[1]" }}\n')
    with pytest.raises(ConfigError, match=r"r\.toml: changes\.0 \(a\).*spark\.master is not something"):
        build(load_rehearsal(path), path)
    path.write_text(f'name = "r"\nbase = "{base}"\n[[changes]]\nname = "a"\nspark = {{ state_store = "rocksdb" }}\n'
                    '[[changes]]\nname = "a"\nspark = { state_store = "rocksdb" }\n')
    with pytest.raises(ConfigError, match="'a' is given twice"):
        load_rehearsal(path)


def test_the_state_checkpoint_format_version_is_read_from_the_commits_written_after_the_change(tmp_path):
    key = "spark.sql.streaming.stateStore.checkpointFormatVersion"
    offsets(tmp_path, 5, {"spark.sql.shuffle.partitions": "4"})
    commits = tmp_path / "checkpoint" / "commits"
    commits.mkdir(parents=True)
    for batch, text, t in ((3, '{"stateUniqueIds":{"0":["a"]}}', AT - 5), (5, '{"nextBatchWatermarkMs":1}', AT + 9)):
        (commits / str(batch)).write_text("v1\n" + text + "\n")
        os.utime(commits / str(batch), (t, t))
    (c,) = measure_changes(tmp_path, [record({"conf": {key: "2"}})], progress((AT + 8, 10)), {"state": "drained"})
    assert (c["settings"][0]["in_force"], c["settings"][0]["taken"]) == ("1", False)  # the old commit is not read
    (commits / "6").write_text('v1\n{"nextBatchWatermarkMs":1,"stateUniqueIds":{"0":["b"]}}\n')
    os.utime(commits / "6", (AT + 11, AT + 11))
    (c,) = measure_changes(tmp_path, [record({"conf": {key: "2"}})], progress((AT + 8, 10)), {"state": "drained"})
    assert (c["settings"][0]["in_force"], c["settings"][0]["taken"]) == ("2", True)


def test_each_batch_is_held_to_the_cap_in_force_when_it_ran():
    from harness.checkers.batch_cap import batch_cap_checks
    from harness.config import load_scenario

    scenario = load_scenario(str(Path(__file__).resolve().parents[2] / "scenarios" / "rehearsals" /
                                 "bases" / "passthrough.toml"), ["spark.source_options.maxOffsetsPerTrigger=1000"])[0]
    rows = progress((AT - 10, 1000), (AT - 5, 1007), (AT + 10, 5000), (AT + 12, 6000))
    raised = [{"at": AT, "changed": {"source_options": {"maxOffsetsPerTrigger": "6000"}}}]
    (check,) = batch_cap_checks(scenario, rows, raised)
    assert check.status == "pass" and "(maxOffsetsPerTrigger 1000 then 6000)" in check.detail
    (check,) = batch_cap_checks(scenario, rows, [])
    assert check.status == "fail" and "batches over the cap: [2, 3]" in check.detail
    switched = [{"at": AT, "changed": {"protocol": ["amqp", "kafka"], "source_options": {"maxEventsPerTrigger": None}}}]
    (check,) = batch_cap_checks(scenario, rows, switched)  # another source, no cap: nothing after it is over
    assert check.status == "pass" and "1000 then none" in check.detail


def test_the_shipped_rehearsal_builds_every_change_before_running_one():
    """scenarios/rehearsals/spark-changes.toml: every change a valid scenario with its one change fault, two
    Spark lines and the Event Hubs switch among them (what `harness rehearse` validates before the first run)."""
    path = Path(__file__).resolve().parents[2] / "scenarios" / "rehearsals" / "spark-changes.toml"
    built = build(load_rehearsal(path), path)
    assert len(built) >= 12
    assert all([f.kind for f in scenario.faults] == ["change"] for _, scenario, _, _ in built)
    lines = {scenario.spark.pyspark for _, scenario, _, _ in built} | {
        row.model_extra["spark"].get("pyspark") for row, *_ in built}
    assert {"3.5", "4.0"} <= lines
    assert any(row.model_extra.get("backend") == {"protocol": "kafka"} and scenario.backend.kind == "eventhubs"
               for row, scenario, _, _ in built)


def test_the_state_at_a_change_is_read_also_when_no_final_state_was(tmp_path):
    """A change Spark refused leaves no final state read (state/), and the state at the change is still judged:
    the run's `state/` being absent is no reason to call it not required."""
    from harness.analysis.state import read_state

    def no_acks(meta):
        raise AssertionError("not reached: the state read records an error")

    assert read_state(tmp_path, "window_counts", {}, no_acks, state_dir="state-at-batch-3")["status"] == "unknown"
    (tmp_path / "state-at-batch-3").mkdir()
    (tmp_path / "state-at-batch-3" / "meta.json").write_text('{"error": "boom"}')
    read = read_state(tmp_path, "window_counts", {}, no_acks, state_dir="state-at-batch-3")
    assert read == {"status": "unknown", "detail": "unknown: the state reader failed: boom"}
    assert read_state(tmp_path, "window_counts", {}, no_acks)["status"] == "not_required"  # the final one: none


def test_an_oracle_that_could_not_judge_is_unknown_not_failed():
    """A change Spark refused before the query had committed a batch that read anything: the query's oracle has
    nothing to judge (harness.analysis.measure says so with ok None), which is unknown, not a pass or a fail."""
    from harness.checkers import oracle
    from tests.unit.test_checkers_literal import view as literal

    windowed = str(Path(__file__).resolve().parents[2] / "scenarios" / "rehearsals" / "bases" / "windowed.toml")
    said = {"ok": None, "detail": "not judged: the query stopped with the failure a fault declared before ..."}
    (check,) = oracle.oracle(literal(windowed, oracle_outcome=said))
    assert (check.name, check.status) == ("oracle_window_counts", "unknown")
    (check,) = oracle.oracle(literal(windowed, oracle_outcome={"ok": False, "detail": "3 windows wrong"}))
    assert check.status == "fail"
