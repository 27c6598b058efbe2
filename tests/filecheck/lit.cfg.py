# lit configuration for irkit's textual tests: `lit tests/filecheck` (or through pytest).
import os
import shutil
import sys

import lit.formats

config.name = "irkit"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

# Run the irkit and filecheck of the interpreter that runs lit (the project's venv).
bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])
for var in ("HOME", "TMPDIR", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%python", sys.executable))
if shutil.which("filecheck", path=config.environment["PATH"]) is None:
    lit_config.fatal("filecheck not found: install the dev extra (pip install -e '.[dev]')")
