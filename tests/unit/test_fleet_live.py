"""ProducerFleet.live: the runner's live totals from the producers' stats lines, read on incrementally; the expected
totals are the hand-written rows' sums (a line still being written counts once it is whole)."""
import json

from harness.producers.fleet import ProducerFleet
def test_live_totals_read_on_from_where_they_stopped(tmp_path):
    fleet = ProducerFleet(tmp_path, None, {"processes": 2})
    a, b = tmp_path / "stats-0.jsonl", tmp_path / "m1" / "stats-1.jsonl"
    b.parent.mkdir()
    a.write_text(json.dumps({"sent": 5, "acked": 4, "failed": 0}) + "\n")
    b.write_text(json.dumps({"sent": 7, "acked": 7, "failed": 1}) + "\n" + '{"sent": 100, "ac')  # torn tail
    assert fleet.live() == {"sent": 12, "acked": 11, "failed": 1}
    with open(b, "a") as f:
        f.write('ked": 90, "failed": 2}\n')
    with open(a, "a") as f:
        f.write(json.dumps({"sent": 3, "acked": 3, "failed": 0}) + "\n")
    assert fleet.live() == {"sent": 115, "acked": 104, "failed": 3}
    assert fleet.live() == {"sent": 115, "acked": 104, "failed": 3}  # nothing new: the same
