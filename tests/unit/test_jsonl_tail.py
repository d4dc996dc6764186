"""JsonlTail: a file still being appended to, read on from where the last read stopped; after every read its
records are what reading the whole file gives (read_jsonl), except a last line still being written."""
import json

from harness.files.jsonl import JsonlTail, read_jsonl


def test_reading_on_gives_what_reading_the_whole_file_gives(tmp_path):
    path = tmp_path / "progress.jsonl"
    tail = JsonlTail(path)
    assert tail.read() == []  # not there yet
    with open(path, "ab") as f:
        f.write(b'{"batchId": 0}\n{"batchId": 1}\n')
        f.flush()
        assert tail.read() == read_jsonl(path) == [{"batchId": 0}, {"batchId": 1}]
        f.write(b'{"batchId": 2, "numInp')  # a line still being written
        f.flush()
        assert tail.read() == [{"batchId": 0}, {"batchId": 1}]
        f.write(b'utRows": 7}\nnot json\n\n[1, 2]\n{"batchId": 3}\n')
        f.flush()
    assert tail.read() == read_jsonl(path) == [{"batchId": 0}, {"batchId": 1}, {"batchId": 2, "numInputRows": 7},
                                                {"batchId": 3}]
    assert tail.read() is tail.records  # nothing new: the same records, the file not read again from its start


def test_each_line_is_parsed_once(tmp_path, monkeypatch):
    path = tmp_path / "lag.jsonl"
    tail = JsonlTail(path)
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(json, "loads", lambda raw: parsed.append(raw) or real_loads(raw))
    for i in range(5):
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": i}) + "\n")
        tail.read()
    assert len(parsed) == 5 and [r["t"] for r in tail.records] == list(range(5))


def test_a_counting_tail_keeps_no_record_and_counts_complete_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    tail = JsonlTail(path, keep=False)
    assert tail.count() == 0  # not there yet
    path.write_bytes(b'{"batchId": 0}\n\n{"batchId": 1}\n{"batchId": 2, "numInp')
    assert tail.count() == 3 and tail.records == []  # the line still being written is not counted yet
    with open(path, "ab") as f:
        f.write(b'utRows": 7}\n')
    assert tail.count() == 4 == len(path.read_bytes().splitlines()) and tail.records == []
