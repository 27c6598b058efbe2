

def test_loading_targets_does_not_import_tvm():
    """Naming targets (sweep planning, list-targets) must not pay TVM's import time."""
    import subprocess
    import sys

    code = ("import sys; from irkit.targets.registry import TARGETS, load_targets; load_targets(); "
            "assert 'tvm-llvm' in TARGETS; print('tvm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
