"""The suite's own layout: pytest imports test modules by basename (rootdir-relative, no packages), so two test
files of one name in different folders stop the whole run at collection ("import file mismatch")."""
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
