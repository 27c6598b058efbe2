"""Element types, dimensions and tensor types.

Design note: a dimension is either a Python ``int`` or a :class:`SymDim`, an
integer polynomial over named symbols (``B``, ``S``, ``B*S``, ``S+1``).  Frontends
produce plain symbols from torch.export ``Dim``, ONNX ``dim_param`` or JAX shape
polymorphism; reshapes and concatenations produce products and sums.  Keeping the
polynomial in a canonical form makes ``B*S == S*B`` true without a solver, which
is all type inference for Transformer graphs needs.
"""

from __future__ import annotations

import builtins
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

_NumpyDType = np.dtype  # inside DType, ``np`` names the property below


class DType(enum.Enum):
    """Element types of the IR, named as MLIR spells them."""

    f64 = "f64"
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    f8e4m3fn = "f8E4M3FN"
    f8e4m3fnuz = "f8E4M3FNUZ"
    f8e5m2 = "f8E5M2"
    f8e5m2fnuz = "f8E5M2FNUZ"
    i64 = "i64"
    i32 = "i32"
    i16 = "i16"
    i8 = "i8"
    ui64 = "ui64"
    ui32 = "ui32"
    ui16 = "ui16"
    ui8 = "ui8"
    bool = "i1"

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype (bf16 through ml_dtypes)."""
        return _NP[self]

    @property
    def itemsize(self) -> int:
        return _NP[self].itemsize

    @property
    def is_float(self) -> builtins.bool:
        return self in (DType.f64, DType.f32, DType.f16, DType.bf16) or self in _FLOAT8

    @property
    def is_float8(self) -> builtins.bool:
        """One of the 8-bit float types (f8E4M3FN, f8E4M3FNUZ, f8E5M2, f8E5M2FNUZ; ONNX FLOAT8*)."""
        return self in _FLOAT8

    @property
    def is_int(self) -> builtins.bool:
        """Every integer type, signed or unsigned (not i1)."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_signed(self) -> builtins.bool:
        """A signed integer type (i8 ... i64); false for floats and i1."""
        return self in _SIGNED

    @property
    def is_unsigned(self) -> builtins.bool:
        """An unsigned integer type (ui8 ... ui64)."""
        return self in _UNSIGNED

    @property
    def bits(self) -> int:
        """Width in bits (1 for i1)."""
        return 1 if self is DType.bool else _NP[self].itemsize * 8

    @property
    def is_bool(self) -> builtins.bool:
        return self is DType.bool

    def __str__(self) -> str:
        return self.value

    @staticmethod
    def parse(text: str) -> DType:
        """Parse an MLIR element type name (``f32``, ``i1``, ``bool``, ``f8E4M3FN``...); the
        float8 names are also accepted in lower case (``f8e4m3fn``)."""
        if text == "bool":
            return DType.bool
        try:
            return DType(text)
        except ValueError:
            low = _LOWER_NAMES.get(text.lower())
            if low is not None and text.startswith("f8"):
                return low
            raise ValueError(
                f"unknown element type '{text}' (expected one of "
                f"{', '.join(d.value for d in DType)})"
            ) from None

    @staticmethod
    def from_numpy(dt: _NumpyDType | type) -> DType:
        """The IR dtype of a NumPy dtype; raises ValueError for unsupported ones."""
        dt = np.dtype(dt)
        for k, v in _NP.items():
            if v == dt:
                return k
        raise ValueError(f"unsupported NumPy dtype {dt}")


_NP: dict[DType, np.dtype] = {
    DType.f64: np.dtype(np.float64),
    DType.f32: np.dtype(np.float32),
    DType.f16: np.dtype(np.float16),
    DType.bf16: np.dtype(ml_dtypes.bfloat16),
    DType.f8e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.f8e4m3fnuz: np.dtype(ml_dtypes.float8_e4m3fnuz),
    DType.f8e5m2: np.dtype(ml_dtypes.float8_e5m2),
    DType.f8e5m2fnuz: np.dtype(ml_dtypes.float8_e5m2fnuz),
    DType.i64: np.dtype(np.int64),
    DType.i32: np.dtype(np.int32),
    DType.i16: np.dtype(np.int16),
    DType.i8: np.dtype(np.int8),
    DType.ui64: np.dtype(np.uint64),
    DType.ui32: np.dtype(np.uint32),
    DType.ui16: np.dtype(np.uint16),
    DType.ui8: np.dtype(np.uint8),
    DType.bool: np.dtype(np.bool_),
}
_SIGNED = frozenset({DType.i8, DType.i16, DType.i32, DType.i64})
_UNSIGNED = frozenset({DType.ui8, DType.ui16, DType.ui32, DType.ui64})
_FLOAT8 = frozenset({DType.f8e4m3fn, DType.f8e4m3fnuz, DType.f8e5m2, DType.f8e5m2fnuz})
_LOWER_NAMES = {d.value.lower(): d for d in _FLOAT8}
_NP_FLOATS = frozenset(_NP[d] for d in (DType.bf16, *_FLOAT8))


def is_float_np(dt: _NumpyDType | type) -> bool:
    """A NumPy dtype holding floats: IEEE (kind ``f``) or an ml_dtypes one (bf16, float8),
    whose ``kind`` is ``V``."""
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in _NP_FLOATS


def is_ml_float_np(dt: _NumpyDType | type) -> bool:
    """An ml_dtypes float (bf16 or a float8 type): NumPy computes poorly or not at all in these (and
    ``float8_e5m2`` even reports kind ``f``), so kernels widen them to f32 first."""
    return np.dtype(dt) in _NP_FLOATS


# ---------------------------------------------------------------------------
# Symbolic dimensions


_Monomial = tuple[str, ...]  # sorted symbol names, repeated for powers
_SYM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, eq=False)
class SymDim:
    """A dimension that is an integer polynomial over named symbols.

    ``terms`` maps a monomial (sorted tuple of symbol names) to its coefficient;
    the empty monomial is the constant term.  Instances are canonical, so
    equality and hashing are structural.
    """

    terms: tuple[tuple[_Monomial, int], ...]

    # -- construction ------------------------------------------------------
    @staticmethod
    def symbol(name: str) -> SymDim:
        if not _SYM_RE.fullmatch(name):
            raise ValueError(f"invalid symbol name '{name}'")
        return SymDim((((name,), 1),))

    @staticmethod
    def _from_dict(d: Mapping[_Monomial, int]) -> Dim:
        items = tuple(sorted((m, c) for m, c in d.items() if c != 0))
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        return SymDim(items)

    def _dict(self) -> dict[_Monomial, int]:
        return dict(self.terms)

    # -- queries -----------------------------------------------------------
    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for m, _ in self.terms for s in m)

    @property
    def is_symbol(self) -> bool:
        """True for a single bare symbol like ``S``."""
        return len(self.terms) == 1 and self.terms[0][1] == 1 and len(self.terms[0][0]) == 1

    @property
    def name(self) -> str:
        return str(self)

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        total = 0
        for mono, coef in self.terms:
            v = coef
            for s in mono:
                if s not in bindings:
                    raise KeyError(s)
                v *= int(bindings[s])
            total += v
        return total

    # -- arithmetic (closed over int | SymDim) ----------------------------
    def __add__(self, other: Dim) -> Dim:
        d = self._dict()
        for m, c in _as_dict(other).items():
            d[m] = d.get(m, 0) + c
        return SymDim._from_dict(d)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return SymDim._from_dict({m: -c for m, c in self.terms})

    def __sub__(self, other: Dim) -> Dim:
        return self + (-other if isinstance(other, int) else -other)  # type: ignore[operator]

    def __rsub__(self, other: Dim) -> Dim:
        return (-self) + other

    def __mul__(self, other: Dim) -> Dim:
        out: dict[_Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _as_dict(other).items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return SymDim._from_dict(out)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymDim) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)

    def __str__(self) -> str:
        parts: list[str] = []
        # Highest-degree terms first reads naturally: "B*S+1".
        for mono, coef in sorted(self.terms, key=lambda t: (-len(t[0]), t[0])):
            body = "*".join(mono)
            if not mono:
                txt = str(abs(coef))
            elif abs(coef) == 1:
                txt = body
            else:
                txt = f"{abs(coef)}*{body}"
            if not parts:
                parts.append(txt if coef > 0 else f"-{txt}")
            else:
                parts.append(("+" if coef > 0 else "-") + txt)
        return "".join(parts)

    __repr__ = __str__


Dim = int | SymDim


def _as_dict(d: Dim) -> dict[_Monomial, int]:
    if isinstance(d, SymDim):
        return d._dict()
    return {(): int(d)} if d else {}


def parse_dim(text: str) -> Dim:
    """Parse a dimension expression: ``128``, ``S``, ``B*S``, ``S+1``, ``2*S-1``."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    toks = re.findall(r"\s*([A-Za-z_][A-Za-z0-9_]*|\d+|[-+*()])", text)
    if "".join(toks) != re.sub(r"\s+", "", text):
        raise ValueError(f"invalid dimension expression '{text}'")
    pos = 0

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def atom() -> Dim:
        t = peek()
        if t is None:
            raise ValueError(f"invalid dimension expression '{text}'")
        take()
        if t == "(":
            v = expr()
            if peek() != ")":
                raise ValueError(f"unbalanced parentheses in '{text}'")
            take()
            return v
        if t == "-":
            return dim_mul(-1, atom())
        if t.isdigit():
            return int(t)
        if _SYM_RE.fullmatch(t):
            return SymDim.symbol(t)
        raise ValueError(f"invalid dimension expression '{text}'")

    def term() -> Dim:
        v = atom()
        while peek() == "*":
            take()
            v = dim_mul(v, atom())
        return v

    def expr() -> Dim:
        v = term()
        while peek() in ("+", "-"):
            op = take()
            rhs = term()
            v = dim_add(v, rhs) if op == "+" else dim_sub(v, rhs)
        return v

    out = expr()
    if pos != len(toks):
        raise ValueError(f"invalid dimension expression '{text}'")
    return out


def dim_add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return SymDim._from_dict({m: _as_dict(a).get(m, 0) + _as_dict(b).get(m, 0)
                              for m in set(_as_dict(a)) | set(_as_dict(b))})


def dim_sub(a: Dim, b: Dim) -> Dim:
    return dim_add(a, dim_mul(-1, b))


def dim_mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, SymDim):
        return a * b
    return b * a  # type: ignore[operator]


def dim_prod(dims: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def dim_floordiv(a: Dim, b: Dim) -> Dim | None:
    """Exact division of dims, or None when it is not provably exact."""
    if isinstance(b, int) and b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b and a % b == 0 else None
    if a == b:
        return 1
    da, db = _as_dict(a), _as_dict(b)
    if len(db) == 1:
        (mb, cb), = db.items()
        out: dict[_Monomial, int] = {}
        for ma, ca in da.items():
            rest = list(ma)
            for s in mb:
                if s not in rest:
                    return None
                rest.remove(s)
            if ca % cb:
                return None
            out[tuple(rest)] = ca // cb
        return SymDim._from_dict(out)
    return None


def eval_dim(d: Dim, bindings: Mapping[str, int]) -> int:
    """The integer value of a dim under symbol bindings (KeyError if unbound)."""
    return d if isinstance(d, int) else d.evaluate(bindings)


def static_dim(d: Dim) -> int:
    """``d`` where the caller knows it is static (a constant's shape, a checked ``is_static``);
    a symbolic dim is a TypeError, as ``int(d)`` would be."""
    if isinstance(d, SymDim):
        raise TypeError(f"dim {d} is symbolic where a static dim is required")
    return d


def static_shape(shape: Iterable[Dim]) -> tuple[int, ...]:
    """:func:`static_dim` of every dim."""
    return tuple(static_dim(d) for d in shape)


def dim_str(d: Dim) -> str:
    return str(d)


# ---------------------------------------------------------------------------
# Tensor types


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type: a shape of dims and an element type."""

    shape: tuple[Dim, ...]
    dtype: DType

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        for d in self.shape:
            if isinstance(d, bool) or not isinstance(d, (int, SymDim)):
                raise TypeError(f"invalid dim {d!r} in tensor shape")
            if isinstance(d, int) and d < 0:
                raise ValueError(f"negative dim {d} in tensor shape")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def symbols(self) -> frozenset[str]:
        out: set[str] = set()
        for d in self.shape:
            if isinstance(d, SymDim):
                out |= d.symbols
        return frozenset(out)

    def num_elements(self, bindings: Mapping[str, int] | None = None) -> int:
        """Element count; symbolic dims need ``bindings``."""
        n = 1
        for d in self.shape:
            n *= eval_dim(d, bindings or {})
        return n

    def nbytes(self, bindings: Mapping[str, int] | None = None) -> int:
        return self.num_elements(bindings) * self.dtype.itemsize

    def concrete_shape(self, bindings: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(eval_dim(d, bindings) for d in self.shape)

    def with_shape(self, shape: Sequence[Dim]) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        cached = _TYPE_STR.get(self)
        if cached is not None:
            return cached
        text = self._text()
        if len(_TYPE_STR) < 200_000:
            _TYPE_STR[self] = text
        return text

    def _text(self) -> str:
        from_dims = "x".join("?" if isinstance(d, SymDim) else str(d) for d in self.shape)
        body = f"{from_dims}x{self.dtype}" if self.shape else str(self.dtype)
        syms = [d for d in self.shape if isinstance(d, SymDim)]
        if syms:
            enc = ", ".join(f'"{d}"' for d in syms)
            return f"tensor<{body}, [{enc}]>"
        return f"tensor<{body}>"


_TYPE_STR: dict[TensorType, str] = {}


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """NumPy broadcasting over int and symbolic dims.

    A symbolic dim broadcast against 1 stays symbolic; against another dim it
    must be equal, except that a symbol against a static size > 1 resolves to the
    static size (the runtime binding is checked by the interpreter).
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        cur: Dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if cur == 1:
                cur = d
            elif cur == d:
                continue
            elif isinstance(cur, SymDim) and isinstance(d, int):
                cur = d
            elif isinstance(d, SymDim) and isinstance(cur, int):
                continue
            else:
                raise ValueError(
                    "shapes " + ", ".join(_shape_str(x) for x in shapes) + " do not broadcast"
                )
        out.append(cur)
    return tuple(out)


def _shape_str(s: Sequence[Dim]) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def shape_str(s: Sequence[Dim]) -> str:
    """``[B, S, 768]``."""
    return _shape_str(s)


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``range(rank)``; ValueError if out of range."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary elementwise op (operands normally already agree)."""
    if a == b:
        return a
    if {a, b} == {DType.bf16, DType.f16}:
        return DType.f32
    if a.is_float8 and b.is_float8:
        return DType.f16  # holds every value of each float8 type
    if a.is_int and b.is_int and a.is_signed != b.is_signed:
        # NumPy's rule: a signed type wide enough for both, i64 at most.
        u, s = (a, b) if a.is_unsigned else (b, a)
        return s if s.bits > u.bits else {8: DType.i16, 16: DType.i32}.get(u.bits, DType.i64)
    return max(a, b, key=_PROMOTE_ORDER.index)


_PROMOTE_ORDER = [DType.bool, DType.ui8, DType.i8, DType.ui16, DType.i16, DType.ui32, DType.i32, DType.ui64,
                  DType.i64, DType.f8e4m3fnuz, DType.f8e4m3fn, DType.f8e5m2fnuz, DType.f8e5m2, DType.bf16,
                  DType.f16, DType.f32, DType.f64]


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


__all__ = [
    "DType", "SymDim", "Dim", "TensorType", "parse_dim", "dim_add", "dim_sub", "dim_mul",
    "dim_prod", "dim_floordiv", "eval_dim", "static_dim", "static_shape", "broadcast_shapes", "shape_str",
    "normalize_axis", "promote", "is_float_np", "is_ml_float_np",
]
