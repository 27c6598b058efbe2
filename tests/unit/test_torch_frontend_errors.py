"""Bad input to the torch frontend gets one clear line naming the file and the problem.

Covers: files that are not .pt2 archives, truncated and corrupt ones, archives
that would make torch unpickle, eval or exec something (each refused, and
nothing from the file runs), factory specs that are malformed or whose factory
fails, programs torch cannot export, and unsupported ops (all listed at once,
with counts and locations).
"""

from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from irkit.errors import IrkitError
from irkit.frontends.common import FrontendError, UnsupportedOpsError
from irkit.frontends.torch_export import (
    import_exported_program,
    import_factory_spec,
    import_torch_factory,
    load_pt2,
)
from irkit.frontends.torch_pt2 import check_program_json, check_sym_expr


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and "Traceback" not in msg, msg
    assert isinstance(e, IrkitError)
    return msg


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.lin(x).relu()


@pytest.fixture(scope="module")
def good_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ep = torch.export.export(Small(), (torch.randn(3, 4),),
                             dynamic_shapes=({0: torch.export.Dim("B")},))
    path = tmp_path_factory.mktemp("pt2") / "small.pt2"
    torch.export.save(ep, str(path))
    return path


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None]) -> Path:
    """Copy a zip, passing each record through ``edit`` (None drops the record)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def edit_json(suffix: str, change: Callable[[Any], None]) -> Callable[[str, bytes], bytes | None]:
    def edit(name: str, data: bytes) -> bytes | None:
        if name.endswith(suffix):
            doc = json.loads(data)
            change(doc)
            return json.dumps(doc).encode()
        return data

    return edit


def load_error(path: Path) -> str:
    with pytest.raises(FrontendError) as ei:
        load_pt2(path)
    msg = one_line(ei.value)
    assert str(path) in msg
    return msg


# ---------------------------------------------------------------------------
# .pt2 files


def test_good_file_loads(good_pt2: Path) -> None:
    m = load_pt2(good_pt2)
    assert str(m.entry.arg_types[0]).startswith("tensor<?x4xf32")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert "no such file" in load_error(tmp_path / "nope.pt2")
    assert "directory" in load_error(tmp_path)


def test_not_a_zip(tmp_path: Path) -> None:
    p = tmp_path / "model.pt2"
    p.write_text("graph(%x) { return %x }\n")
    assert "not a .pt2 archive" in load_error(p)
    onnx_like = tmp_path / "model.onnx"
    onnx_like.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(range(200)))
    assert "not a .pt2 archive" in load_error(onnx_like)


def test_truncated(good_pt2: Path, tmp_path: Path) -> None:
    data = good_pt2.read_bytes()
    for cut in (len(data) // 2, len(data) - 30):
        p = tmp_path / f"cut{cut}.pt2"
        p.write_bytes(data[:cut])
        assert "truncated" in load_error(p) or "corrupt" in load_error(p)


def test_corrupt_record(good_pt2: Path, tmp_path: Path) -> None:
    # Flip bytes inside the first weight's data: the zip CRC no longer matches.
    data = bytearray(good_pt2.read_bytes())
    with zipfile.ZipFile(good_pt2) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("data/weights/weight_0"))
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for k in range(start, start + 8):
        data[k] ^= 0xFF
    p = tmp_path / "corrupt.pt2"
    p.write_bytes(bytes(data))
    msg = load_error(p)
    assert "corrupt" in msg and "weight_0" in msg


def test_zip_that_is_not_pt2(tmp_path: Path) -> None:
    p = tmp_path / "weights.pt2"
    torch.save({"w": torch.ones(2)}, str(p))  # a torch.save zip (data.pkl inside)
    assert "not a torch.export .pt2" in load_error(p)
    q = tmp_path / "other.pt2"
    with zipfile.ZipFile(q, "w") as z:
        z.writestr("a.txt", "hello")
        z.writestr("b/c.txt", "world")
    assert "not a .pt2 archive" in load_error(q)


def test_missing_program(good_pt2: Path, tmp_path: Path) -> None:
    p = rewrite(good_pt2, tmp_path / "noprog.pt2", lambda n, d: None if "/models/" in n else d)
    assert "no exported program" in load_error(p)


def test_garbage_json(good_pt2: Path, tmp_path: Path) -> None:
    p = rewrite(good_pt2, tmp_path / "badjson.pt2",
                lambda n, d: b"{not json" if n.endswith("models/model.json") else d)
    assert "not valid JSON" in load_error(p)


def test_archive_version(good_pt2: Path, tmp_path: Path) -> None:
    p = rewrite(good_pt2, tmp_path / "v99.pt2", lambda n, d: b"99" if n.endswith("/archive_version") else d)
    assert "archive version 99" in load_error(p)


def test_short_weight_record(good_pt2: Path, tmp_path: Path) -> None:
    p = rewrite(good_pt2, tmp_path / "short.pt2",
                lambda n, d: d[:8] if n.endswith("data/weights/weight_0") else d)
    assert "past the end" in load_error(p)


def test_pickled_weights_refused(good_pt2: Path, tmp_path: Path) -> None:
    def mark(doc: Any) -> None:
        for meta in doc["config"].values():
            meta["use_pickle"] = True

    p = rewrite(good_pt2, tmp_path / "pickled.pt2", edit_json("model_weights_config.json", mark))
    assert "refusing to unpickle" in load_error(p)


def test_custom_objects_refused(good_pt2: Path, tmp_path: Path) -> None:
    def add(doc: Any) -> None:
        doc["config"]["obj"] = {"path_name": "custom_obj_0", "is_param": False, "use_pickle": True,
                                "tensor_meta": None}

    p = rewrite(good_pt2, tmp_path / "custom.pt2", edit_json("model_constants_config.json", add))
    assert "pickle" in load_error(p)


def test_legacy_pickled_weights_refused(good_pt2: Path, tmp_path: Path) -> None:
    def edit(name: str, data: bytes) -> bytes | None:
        if name.endswith("model_weights_config.json"):
            return None
        if name.endswith("data/weights/weight_0"):
            return data
        return data

    p = rewrite(good_pt2, tmp_path / "legacy.pt2", edit)
    with zipfile.ZipFile(p, "a") as z:
        root = z.namelist()[0].split("/")[0]
        z.writestr(f"{root}/data/weights/model.pt", b"\x80\x02}q\x00.")
    assert "legacy pickled format" in load_error(p)


class _Marker:
    """Unpickling this creates a file: proof that a pickle was (not) loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


def test_sample_inputs_pickle_is_never_read(good_pt2: Path, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    evil = pickle.dumps(_Marker(str(marker)))
    p = rewrite(good_pt2, tmp_path / "evil_inputs.pt2",
                lambda n, d: evil if "data/sample_inputs/" in n else d)
    m = load_pt2(p)  # the program itself is fine
    assert m.entry.args
    assert not marker.exists()


def test_expression_injection_refused(good_pt2: Path, tmp_path: Path) -> None:
    marker = tmp_path / "evaluated"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch() or Symbol('s0')"

    def inject(doc: Any) -> None:
        for meta in doc["graph_module"]["graph"]["tensor_values"].values():
            for size in meta["sizes"]:
                if "as_expr" in size:
                    size["as_expr"]["expr_str"] = payload

    p = rewrite(good_pt2, tmp_path / "evil_expr.pt2", edit_json("models/model.json", inject))
    msg = load_error(p)
    assert "refusing" in msg and "expr_str" in msg
    assert not marker.exists()


def test_name_injection_refused(good_pt2: Path, tmp_path: Path) -> None:
    def inject(doc: Any) -> None:
        node = doc["graph_module"]["graph"]["nodes"][0]
        node["outputs"][0]["as_tensor"]["name"] = "x = __import__('os').getcwd(); y"

    p = rewrite(good_pt2, tmp_path / "evil_name.pt2", edit_json("models/model.json", inject))
    assert "not an identifier" in load_error(p)

    def target(doc: Any) -> None:
        doc["graph_module"]["graph"]["nodes"][0]["target"] = "os.system('true')"

    q = rewrite(good_pt2, tmp_path / "evil_target.pt2", edit_json("models/model.json", target))
    assert "not a dotted name" in load_error(q)


@pytest.mark.parametrize("expr,ok", [
    ("Symbol('s0', positive=True, integer=True)", True),
    ("Mul(Integer(2), Add(Symbol('s0', integer=True), Integer(-1)))", True),
    ("FloorDiv(Symbol('s1', integer=True), Integer(2))", True),
    ("2*s0 + 1", True),
    ("Pow(Integer(10), Pow(Integer(10), Integer(10)))", False),  # would hang sympy
    ("10**10**10", False),
    ("Symbol('s0').__class__", False),
    ("Symbol('__import__')", False),
    ("eval('1')", False),
    ("[s for s in ()]", False),
    ("lambda: 0", False),
])
def test_expression_grammar(expr: str, ok: bool) -> None:
    assert (check_sym_expr(expr) is None) == ok


def test_program_json_checks() -> None:
    assert check_program_json({"nope": 1}) is not None
    doc = {"graph_module": {"graph": {"nodes": [{"target": "torch.ops.aten.add.Tensor",
                                                 "inputs": [{"name": "self"}]}]}},
           "range_constraints": {"s0": {}}}
    assert check_program_json(doc) is None
    doc["range_constraints"] = {"__import__('os')": {}}
    assert check_program_json(doc) is not None


# ---------------------------------------------------------------------------
# factories and specs


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


FACTORY_FILE = '''
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        return x * 2

def good():
    return Net(), (torch.randn(2, 3),)

def good3():
    return Net(), (torch.randn(2, 3),), ({0: torch.export.Dim("B")},)

def boom():
    raise ValueError("no weights at /data/ckpt")

def not_a_model():
    return {"weights": 1}

def jax_like():
    def f(x):
        return x
    return f, (1.0,)

def data_dependent():
    class D(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x
    return D(), (torch.randn(3),), ({0: torch.export.Dim("N")},)

value = 3
'''


def spec_error(spec: str) -> str:
    with pytest.raises(FrontendError) as ei:
        import_factory_spec(spec)
    return one_line(ei.value)


def test_factory_spec_ok(tmp_path: Path) -> None:
    p = write(tmp_path, "models.py", FACTORY_FILE)
    m = import_factory_spec(f"{p}:good")
    assert str(m.entry.arg_types[0]) == "tensor<2x3xf32>"
    m3 = import_factory_spec(f"{p}:good3")
    assert str(m3.entry.arg_types[0]) == 'tensor<?x3xf32, ["B"]>'


def test_factory_spec_errors(tmp_path: Path) -> None:
    p = write(tmp_path, "models.py", FACTORY_FILE)
    assert "expected FILE.py:FACTORY" in spec_error(str(p))
    assert "no such file" in spec_error(f"{tmp_path / 'missing.py'}:good")
    assert "no function 'nope'" in spec_error(f"{p}:nope")
    assert "good" in spec_error(f"{p}:nope")  # the message lists what the file defines
    assert "not a function" in spec_error(f"{p}:value")
    msg = spec_error(f"{p}:boom")
    assert "the factory raised ValueError: no weights at /data/ckpt" in msg and "boom" in msg
    assert "expects (torch.nn.Module, example_inputs)" in spec_error(f"{p}:not_a_model")
    assert "tuple of (function, tuple)" in spec_error(f"{p}:jax_like")
    msg = spec_error(f"{p}:data_dependent")
    assert msg.startswith(f"{p}:data_dependent: torch.export failed")


def test_factory_file_syntax_and_import_errors(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.py", "def f(:\n    pass\n")
    msg = spec_error(f"{bad}:f")
    assert f"{bad}:1: syntax error" in msg
    imp = write(tmp_path, "imp.py", "import irkit_no_such_module_xyz\n")
    assert "ModuleNotFoundError" in spec_error(f"{imp}:f")


def test_not_an_exported_program() -> None:
    with pytest.raises(FrontendError) as ei:
        import_exported_program(Small())
    assert "expected a torch.export.ExportedProgram" in one_line(ei.value)


def test_bad_example_inputs() -> None:
    with pytest.raises(FrontendError) as ei:
        import_torch_factory(Small(), "not inputs")
    assert "example inputs" in one_line(ei.value)


# ---------------------------------------------------------------------------
# unsupported ops


class Unsupported(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        # A tensor degree of a Hermite polynomial is refused (the recurrence's length would depend
        # on the data); cholesky is out of scope (a linear-algebra decomposition).
        a = torch.special.hermite_polynomial_h(x, x)
        b = torch.special.hermite_polynomial_h(x * 2, x)
        c = torch.linalg.cholesky(x @ x.T + 4.0)
        return a + b + c


def test_unsupported_ops_listed_once_with_counts_and_locations() -> None:
    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch_factory(Unsupported(), (torch.randn(3, 3),))
    msg = one_line(ei.value)
    e = ei.value
    # torch's own table decomposed what it could; the error says so and lists the rest.
    assert "after torch decomposed aten.linalg_cholesky.default" in msg
    herm = next(k for k in e.ops if k.startswith("aten.special_hermite_polynomial_h.default"))
    assert set(e.ops) == {herm, "aten.linalg_cholesky_ex.default"} and "degree n as a tensor" in herm
    assert len(e.ops[herm]) == 2
    assert ") x2 (" in msg and "aten.linalg_cholesky_ex.default x1" in msg
    assert "test_torch_frontend_errors.py:" in msg  # the user's lines, not torch's
    assert "3 unsupported op(s) of 2 kind(s)" in msg


class Decomposable(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.nn.functional.elu(x) + torch.hypot(x, x * 0.5)


def test_ops_without_a_converter_are_decomposed_by_torch() -> None:
    # elu has no converter: torch's table decomposes exactly it (hypot has one).
    x = torch.randn(3, 4)
    ep = torch.export.export(Decomposable(), (x,))
    m = import_exported_program(ep)
    from irkit.interp import run

    got = run(m, [x.numpy()], float64=True)[0]
    want = Decomposable()(x).double().numpy()
    assert abs(got - want).max() < 1e-5
    with pytest.raises(UnsupportedOpsError) as ei:
        import_exported_program(ep, auto_decompose=False)
    assert set(ei.value.ops) == {"aten.elu.default"}


class DataDependentOps(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.nonzero(x > 0).sum() + torch.masked_select(x, x > 0).sum() + x.sum()


def test_data_dependent_ops_are_named_with_the_reason() -> None:
    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch_factory(DataDependentOps(), (torch.randn(3, 4),))
    msg = one_line(ei.value)
    assert "aten.nonzero.default (nonzero's output size depends on the data" in msg
    assert "masked_select" in msg and "test_torch_frontend_errors.py:" in msg


class ViewInPlace(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        y = x * 1.0
        v = y[:, :2]
        v.add_(1.0)  # also changes y: not expressible with SSA values
        return y


class FloorDivShape(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x[: x.shape[0] // 2] * 2.0


def test_unexpressible_cases_name_the_reason() -> None:
    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch_factory(ViewInPlace(), (torch.randn(3, 4),))
    assert "a view (slice)" in one_line(ei.value)
    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch_factory(FloorDivShape(), (torch.randn(4, 3),), ({0: torch.export.Dim.AUTO},))
    assert "(s" in one_line(ei.value) and "//2) is not a polynomial" in one_line(ei.value)


def test_export_failure_is_one_line_with_the_reason() -> None:
    with pytest.raises(FrontendError) as ei:
        import_torch_factory(FloorDivShape(), (torch.randn(4, 3),), ({0: torch.export.Dim("N", max=64)},))
    msg = one_line(ei.value)
    assert "torch.export failed" in msg and "Constraints violated (N)" in msg
    assert len(msg) > len("torch.export of FloorDivShape: torch.export failed: UserError: "
                          "Constraints violated (N)! For more information")


def test_every_converter_names_a_real_aten_op() -> None:
    # A typo in the table would silently leave an op unsupported.
    from irkit.frontends.torch_ops import CONVERTERS

    for key in CONVERTERS:
        if not key.startswith(("aten.", "prims.")):
            continue
        parts = key.split(".")
        packet = getattr(getattr(torch.ops, parts[0]), parts[1], None)
        assert packet is not None, key
        if len(parts) == 3:
            assert parts[2] in packet.overloads(), key
