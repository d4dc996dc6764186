"""A machine without some packages, for a test: `WITHOUT.format(gone={...})` is a `python -c` program that makes the
named packages (and their distributions' metadata) invisible before the harness is imported, then runs the harness's
CLI with the program's arguments. The `-c` program is what such a machine runs, start to end, in a subprocess."""

WITHOUT = """
import importlib.metadata as m, importlib.util as u, sys
GONE = {gone!r}
_version = m.version
def version(name):
    if name.lower() in GONE:
        raise m.PackageNotFoundError(name)
    return _version(name)
m.version = version
_find_spec = u.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] in GONE or name in GONE:
        return None
    return _find_spec(name, package)
u.find_spec = find_spec
class Gone:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in GONE or name in GONE:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, Gone())
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""
