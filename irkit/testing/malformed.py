"""A generator of malformed ONNX and ``.pt2`` files, and a checker for how irkit meets them.

``generate(folder)`` writes at least 200 broken inputs — truncated and bit-flipped
files, protobufs that are not models, wrong types, missing and dangling inputs,
cycles, duplicate names, absurd dims, external data escaping the model's
folder through ``..``, absolute paths and symlinks, ``.pt2`` archives that are
not zips or carry pickles — and ``check(path)`` imports one and reports whether
irkit answered with one clean error line, how long it took and how much memory
it allocated.  ``python -m irkit.testing.malformed DIR`` runs them all.
"""

from __future__ import annotations

import io
import os
import random
import sys
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _base_model(hidden: int = 8):  # type: ignore[no-untyped-def]
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((hidden,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["a"], name="add"),
             helper.make_node("Softmax", ["a"], ["y"], name="sm", axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", hidden])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(m)
    return m


def _onnx_cases(d: Path) -> list[Path]:
    import onnx
    from onnx import TensorProto, helper

    out: list[Path] = []
    good = _base_model()
    data = good.SerializeToString()
    rng = random.Random(1)

    def write(name: str, blob: bytes) -> None:
        p = d / f"{name}.onnx"
        p.write_bytes(blob)
        out.append(p)

    def variant(name: str, edit: Callable[[onnx.ModelProto], object]) -> None:
        m = onnx.ModelProto()
        m.CopyFrom(good)
        edit(m)
        write(name, m.SerializeToString())

    for i, cut in enumerate(sorted(rng.sample(range(1, len(data)), 60))):
        write(f"truncated_{i:02d}", data[:cut])
    for i in range(60):
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        write(f"bitflip_{i:02d}", bytes(b))
    write("empty", b"")
    write("not_protobuf_text", b"this is not a model\n")
    write("graph_not_model", good.graph.SerializeToString())
    write("tensor_not_model", good.graph.initializer[0].SerializeToString())
    write("random_bytes", bytes(rng.randrange(256) for _ in range(2000)))
    variant("no_graph", lambda m: m.ClearField("graph"))
    variant("no_opset", lambda m: m.ClearField("opset_import"))
    variant("future_opset", lambda m: (m.opset_import.__delitem__(0),
                                       m.opset_import.append(helper.make_opsetid("", 99))))
    variant("missing_initializer", lambda m: m.graph.initializer.__delitem__(0))
    variant("dangling_input", lambda m: m.graph.node[1].input.__setitem__(0, "nowhere"))
    variant("dangling_output", lambda m: m.graph.output[0].__setattr__("name", "nothing"))
    variant("cycle", lambda m: m.graph.node[0].input.__setitem__(0, "y"))
    variant("duplicate_node_output", lambda m: m.graph.node[1].output.__setitem__(0, "h"))
    variant("duplicate_initializer", lambda m: m.graph.initializer.append(m.graph.initializer[0]))
    variant("duplicate_input", lambda m: m.graph.input.append(m.graph.input[0]))
    variant("unknown_op", lambda m: m.graph.node[2].__setattr__("op_type", "FrobnicateAttention"))
    variant("unknown_domain", lambda m: m.graph.node[2].__setattr__("domain", "com.example"))
    variant("wrong_input_type",
            lambda m: m.graph.input[0].type.tensor_type.__setattr__("elem_type", TensorProto.STRING))
    variant("wrong_init_type", lambda m: m.graph.initializer[0].__setattr__("data_type", TensorProto.INT64))
    variant("init_shape_mismatch", lambda m: m.graph.initializer[0].dims.__setitem__(0, 3))
    variant("absurd_dims",
            lambda m: m.graph.input[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", 99999999999))
    variant("absurd_init_dims", lambda m: (m.graph.initializer[0].dims.__setitem__(0, 99999999999),
                                           m.graph.initializer[0].dims.__setitem__(1, 99999999999)))
    variant("negative_dim", lambda m: m.graph.input[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", -4))
    variant("bad_attr_type", lambda m: (m.graph.node[2].attribute.__delitem__(0),
                                        m.graph.node[2].attribute.append(helper.make_attribute("axis", "minus one"))))
    variant("too_few_inputs", lambda m: m.graph.node[0].input.__delitem__(1))
    variant("too_many_inputs", lambda m: m.graph.node[2].input.append("x"))
    variant("no_outputs", lambda m: m.graph.ClearField("output"))
    for i, loc in enumerate(["../outside.bin", "/etc/passwd", "sub/../../escape.bin", "link.bin", "missing.bin",
                             "..", "./../x"]):
        sub = d / f"ext_{i}"
        sub.mkdir(exist_ok=True)
        if loc == "link.bin":
            target = d / "outside_target.bin"
            target.write_bytes(b"\0" * 256)
            try:
                (sub / "link.bin").symlink_to(target)
            except OSError:
                pass

        def ext(m: onnx.ModelProto, loc: str = loc) -> None:
            t = m.graph.initializer[0]
            t.ClearField("float_data")
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            t.external_data.add(key="location", value=loc)

        m = onnx.ModelProto()
        m.CopyFrom(good)
        ext(m)
        p = sub / "model.onnx"
        p.write_bytes(m.SerializeToString())
        out.append(p)
    return out


def _pt2_cases(d: Path) -> list[Path]:
    out: list[Path] = []
    rng = random.Random(2)

    def write(name: str, blob: bytes) -> None:
        p = d / f"{name}.pt2"
        p.write_bytes(blob)
        out.append(p)

    write("empty", b"")
    write("text", b"not a zip archive at all")
    write("random", bytes(rng.randrange(256) for _ in range(4096)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x04cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.")
    write("pickle_payload", buf.getvalue())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello.txt", "a zip, but not a .pt2")
    write("wrong_zip", buf.getvalue())
    real = _real_pt2()
    if real is not None:
        for i, cut in enumerate(sorted(rng.sample(range(1, len(real)), 40))):
            write(f"truncated_{i:02d}", real[:cut])
        for i in range(30):
            b = bytearray(real)
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            write(f"bitflip_{i:02d}", bytes(b))
    return out


def _real_pt2() -> bytes | None:
    try:
        import torch
    except ImportError:
        return None

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.lin(x), -1)

    ep = torch.export.export(M(), (torch.randn(2, 8),))
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    return buf.getvalue()


def generate(folder: str | Path) -> list[Path]:
    """Write every malformed case under ``folder``; returns their paths."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    (d / "onnx").mkdir(exist_ok=True)
    (d / "pt2").mkdir(exist_ok=True)
    return _onnx_cases(d / "onnx") + _pt2_cases(d / "pt2")


@dataclass
class Outcome:
    """How irkit met one malformed file."""

    path: Path
    clean: bool
    seconds: float
    """CPU seconds of this process (what the input costs; not inflated by a loaded machine)."""
    peak_bytes: int
    message: str
    wall_seconds: float = 0.0


def check(path: Path) -> Outcome:
    """Import ``path``; clean = a one-line irkit error, or a valid module (a mutation can be harmless)."""
    from irkit.cli import _report
    from irkit.errors import IrkitError
    from irkit.frontends import import_source
    from irkit.ir.verify import verify

    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    msg = ""
    try:
        m = import_source(str(path))
        verify(m)
        clean = True
        msg = "imported (the mutation was harmless)"
    except Exception as e:  # noqa: BLE001 - classified just below
        err = io.StringIO()
        old = sys.stderr
        sys.stderr = err
        try:
            code = _report(e, IrkitError)
        finally:
            sys.stderr = old
        msg = err.getvalue().strip()
        clean = code == 1 and msg.count("\n") == 0 and msg.startswith("irkit: error:")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return Outcome(path, clean, cpu, peak, msg, dt)


def warm_up(folder: Path) -> None:
    """Import one valid file per frontend: the first import of each loads its framework
    (seconds), which is not time spent on a malformed input."""
    import onnx

    warm = folder / "warm.onnx"
    onnx.save(_base_model(), str(warm))
    check(warm)
    real = _real_pt2()
    if real is not None:
        (folder / "warm.pt2").write_bytes(real)
        check(folder / "warm.pt2")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = argv if argv is not None else sys.argv[1:]
    folder = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="irkit-malformed-"))
    cases = generate(folder)
    warm_up(folder)
    bad = 0
    worst_t, worst_m = 0.0, 0
    for p in cases:
        o = check(p)
        worst_t, worst_m = max(worst_t, o.seconds), max(worst_m, o.peak_bytes)
        if not o.clean or o.seconds > 1.0 or o.peak_bytes > 256 << 20:
            bad += 1
            print(f"FAIL {p}: {o.seconds:.2f} CPU s {o.peak_bytes >> 20} MiB: {o.message}")
    print(f"{len(cases)} malformed files: {len(cases) - bad} clean, {bad} failed; slowest {worst_t:.3f} CPU s, "
          f"largest allocation {worst_m / 2**20:.1f} MiB")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    raise SystemExit(main())
