"""What the torch.export importer and its converters share: the converter context.

Design note.  :mod:`~irkit.frontends.torch_export` (the FX walk) and
:mod:`~irkit.frontends.torch_ops` (the ATen converter table) both need the
converter context :class:`ConvertContext`, the :class:`Unsupported` exception, lazy
secondary results and the dtype maps.  They live here, below both, so that
the importer can import the converter table at module level and the import
graph stays a tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from irkit.errors import Unsupported
from irkit.ir.builder import Builder
from irkit.ir.core import Location, Value
from irkit.ir.types import Dim, DType, SymDim, TensorType, static_shape

# torch is imported lazily (inside functions) so that `import irkit` never needs it.


class DataDependent(Unsupported):
    """The node's output shape depends on the data (``nonzero``, ``masked_select``,
    ``unique``): no static-shape IR expresses it, and no decomposition helps."""


# ---------------------------------------------------------------------------
# dtypes


_DTYPES: dict[Any, DType] = {}


def torch_dtype_to_ir(dt: Any) -> DType:
    """The IR dtype of a ``torch.dtype``; :class:`Unsupported` for complex, fp8 and the like."""
    if not _DTYPES:
        import torch

        _DTYPES.update({
            torch.float32: DType.f32, torch.float64: DType.f64, torch.float16: DType.f16,
            torch.bfloat16: DType.bf16, torch.int64: DType.i64, torch.int32: DType.i32,
            torch.int8: DType.i8, torch.int16: DType.i16, torch.uint8: DType.ui8, torch.bool: DType.bool,
        })
        for name, ir in (("uint16", DType.ui16), ("uint32", DType.ui32), ("uint64", DType.ui64)):
            if hasattr(torch, name):  # torch >= 2.3
                _DTYPES[getattr(torch, name)] = ir
    try:
        return _DTYPES[dt]
    except KeyError:
        raise Unsupported(f"dtype {dt} has no IR equivalent") from None


def ir_dtype_to_torch(dt: DType) -> Any:
    import torch

    torch_dtype_to_ir(torch.float32)  # fills the table
    for k, v in _DTYPES.items():
        if v == dt:
            return k
    raise Unsupported(f"IR dtype {dt} has no torch equivalent")


def tensor_to_numpy(t: Any, copy: bool = True) -> np.ndarray:
    """A CPU copy of a torch tensor as NumPy (bf16 through ml_dtypes, no pickle), read-only.

    ``copy=False`` shares the memory of a CPU tensor that NumPy can view as the IR dtype
    (the array keeps the tensor alive): for tensors nobody else will write, such as the
    weights of a program loaded from a file."""
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not copy and t.dtype != torch.bfloat16 and t.is_contiguous():
        dt = torch_dtype_to_ir(t.dtype)
        arr = t.numpy()
        if arr.dtype == dt.np:
            arr.flags.writeable = False
            return arr
    if t.dtype == torch.bfloat16:
        arr = t.contiguous().view(torch.int16).numpy().view(DType.bf16.np).copy()
    else:
        dt = torch_dtype_to_ir(t.dtype)
        arr = t.contiguous().numpy()
        arr = arr.astype(dt.np) if arr.dtype != dt.np else arr.copy()
    # Our own copy, read-only: the IR's Dense keeps it as is instead of copying again.
    arr.flags.writeable = False
    return arr


class LazyResult:
    """A multi-output op's secondary result, built only if some node uses it."""

    def __init__(self, build: Callable[[], Any]):
        self.build = build
        self.value: Any = None
        self.done = False

    @staticmethod
    def force(v: Any) -> Any:
        if isinstance(v, LazyResult):
            if not v.done:
                v.value = v.build()
                v.done = True
            return v.value
        return v


def lazy(build: Callable[[], Any]) -> LazyResult:
    """Wrap a secondary result (e.g. layer norm's mean) so it is built on first use."""
    return LazyResult(build)


# ---------------------------------------------------------------------------
# converter context


class ConvertContext:
    """What a converter sees: the builder, the node's metadata and helpers."""

    def __init__(self, imp: Any, node: Any, loc: Location):
        self.imp = imp
        self.node = node
        self.loc = loc
        self.b: Builder = imp.b  # type: ignore[assignment]

    # -- metadata ------------------------------------------------------------
    @property
    def meta(self) -> Any:
        return self.node.meta.get("val")

    def out_type(self, k: int | None = None) -> TensorType:
        v = self.meta if k is None else self.meta[k]
        if v is None or not hasattr(v, "shape"):
            raise Unsupported("torch recorded no tensor metadata for this node")
        return self.imp.meta_type(v)

    @property
    def out_dtype(self) -> DType:
        return self.out_type().dtype

    @property
    def out_shape(self) -> tuple[Dim, ...]:
        return self.out_type().shape

    def dim(self, x: Any) -> Dim:
        """An int or a size (from a SymInt node) as a dim."""
        if isinstance(x, (int, SymDim)) and not isinstance(x, bool):
            return x
        if isinstance(x, np.integer):
            return int(x)
        raise Unsupported(f"expected a size, got {x!r}")

    # -- values --------------------------------------------------------------
    def cast(self, v: Value, dt: DType) -> Value:
        if v.dtype == dt:
            return v
        return self.b.cast(v, to=dt)

    def tensor(self, x: Any, dt: DType) -> Value:
        """``x`` (a Value, a Python number or a size) as a tensor of dtype ``dt``."""
        if isinstance(x, Value):
            return self.cast(x, dt)
        if isinstance(x, SymDim):
            return self.cast(self.dim_tensor(x), dt)
        if isinstance(x, (bool, int, float, np.number)):
            v = x
            if dt.is_int and isinstance(x, float):
                if not float(x).is_integer():
                    raise Unsupported(f"scalar {x} in an integer op")
                v = int(x)
            if dt.is_bool:
                v = bool(x)
            return self.b.scalar(v.item() if isinstance(v, np.number) else v, dt)
        raise Unsupported(f"expected a tensor or number, got {type(x).__name__}")

    def dim_tensor(self, d: Dim) -> Value:
        """A rank-0 i64 tensor holding the value of dim ``d`` (symbolic dims too):
        a constant when static, else ``ik.dim_value``."""
        if isinstance(d, int):
            return self.b.scalar(d, DType.i64)
        return self.b.dim_value(dim=(d,), dtype=DType.i64)

    def reshape(self, v: Value, shape: Sequence[Dim]) -> Value:
        shape = tuple(shape)
        if v.shape == shape:
            return v
        return self.b.reshape(v, shape=shape)

    def broadcast(self, v: Value, shape: Sequence[Dim]) -> Value:
        shape = tuple(shape)
        if v.shape == shape:
            return v
        return self.b.broadcast(v, shape=shape)

    def splat(self, value: Any, dt: DType, shape: Sequence[Dim]) -> Value:
        """A tensor of ``shape`` filled with ``value`` (a constant when static)."""
        shape = tuple(shape)
        if isinstance(value, Value):
            return self.broadcast(self.cast(value, dt), shape)
        if all(isinstance(d, int) for d in shape):
            v = self.tensor(value, dt)
            if not shape:
                return v
            if isinstance(value, SymDim):
                return self.broadcast(v, shape)
            val = bool(value) if dt.is_bool else (int(value) if dt.is_int else float(value))
            return self.b.scalar(val, dt, static_shape(shape))
        return self.b.broadcast(self.tensor(value, dt), shape=shape)

    def rank(self, v: Value) -> int:
        return v.type.rank


def _result_dtype(*xs: Any) -> DType:
    """torch's type promotion over tensors (Values) and Python scalars."""
    import torch

    objs: list[Any] = []
    for x in xs:
        if isinstance(x, Value):
            objs.append(torch.empty((1,) if x.type.rank else (), dtype=ir_dtype_to_torch(x.dtype)))
        elif isinstance(x, SymDim):
            objs.append(1)
        else:
            objs.append(x)
    if len(objs) == 1:
        o = objs[0]
        return torch_dtype_to_ir(o.dtype if isinstance(o, torch.Tensor) else torch.tensor(o).dtype)
    dt = torch.result_type(objs[0], objs[1])
    for o in objs[2:]:
        dt = torch.promote_types(dt, torch.result_type(torch.empty((), dtype=dt), o))
    return torch_dtype_to_ir(dt)


result_dtype = _result_dtype



__all__ = [
    "ConvertContext",
    "DataDependent",
    "LazyResult",
    "Unsupported",
    "ir_dtype_to_torch",
    "lazy",
    "result_dtype",
    "tensor_to_numpy",
    "torch_dtype_to_ir",
]
