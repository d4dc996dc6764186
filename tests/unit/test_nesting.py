"""Input nested beyond any configuration's depth refused before a parser recurses into it (issue 31 item 8): a
`--set` value and an emulator Config.json 50,000 levels deep ended in a RecursionError's traceback; now exit 2
naming the key or the file."""
from harness.cli import main
from harness.text.nesting import MAX_DEPTH, depth, too_deep

DEEP = "[" * 50_000 + "]" * 50_000


def test_depth_counts_arrays_and_tables_outside_strings_and_comments():
    assert depth('{"a": [1, {"b": [2]}]}') == 4
    assert depth('{"a": "[[[[", "b": "\\"[["}') == 1  # brackets in strings, an escaped quote
    assert depth("a = '[[[' # [[[[\nb = [[1]]") == 2  # a TOML literal string and a comment
    assert depth("") == 0 and depth("]]]") == 0
    assert too_deep("[" * MAX_DEPTH + "]" * MAX_DEPTH) is None
    assert too_deep("[" * (MAX_DEPTH + 1)) == f"nested {MAX_DEPTH + 1} levels deep (at most {MAX_DEPTH}: arrays and " \
                                              "tables inside each other)"


def test_a_deep_set_value_is_exit_2_naming_the_key(capsys):
    assert main(["validate", "steady", "--set", f"producers.rate.eps={DEEP}"]) == 2
    assert "--set producers.rate.eps=...: the value is nested 50,000 levels deep" in capsys.readouterr().err


def test_a_deep_emulator_config_is_exit_2_naming_the_file(tmp_path, capsys):
    path = tmp_path / "Config.json"
    path.write_text(DEEP)
    assert main(["emulator", "serve", "--no-tls", "--no-websockets", "--config", str(path)]) == 2
    assert f"{path}: nested 50,000 levels deep" in capsys.readouterr().err
