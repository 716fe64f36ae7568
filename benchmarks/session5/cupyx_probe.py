"""Which call of a GPU `hspZ run` first imports cupyx, when hspz does not import it itself.

    python benchmarks/session5/cupyx_probe.py REF QRY

`hspz.lean.import_without(..., "cupyx")` is made a no-op and an import hook prints the Python
stack of the first `import cupyx` (the run goes on: cupyx is then imported as usual).
"""

from __future__ import annotations

import importlib.abc
import sys
import traceback

from hspz import lean

_plain = lean.import_without


def _without_cupyx(blocked: str, module: str):
    return None if module == "cupyx" else _plain(blocked, module)


lean.import_without = _without_cupyx


class _Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "cupyx":
            sys.meta_path.remove(self)
            print("first import of cupyx from:", file=sys.stderr)
            traceback.print_stack(file=sys.stderr)
        return None


sys.meta_path.insert(0, _Spy())
from hspz.cli import main  # noqa: E402

code = main(["run", "-r", sys.argv[1], "-q", sys.argv[2], "--backend", "gpu", "-o", "/tmp/probe"])
print("exit", code, "cupyx imported:", "cupyx" in sys.modules, file=sys.stderr)
