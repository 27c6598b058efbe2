"""XLA targets: ``xla-cpu``, ``xla-gpu``, ``xla-tpu-{v4,v5e,v5p,v6e}``.

Design note
-----------
One class serves six names. ``lower(module, bindings)`` translates the IR entry
function op by op to JAX (:mod:`irkit.targets.xla_lower`), compiles it for one
chip with :func:`irkit.targets.xla_compile.compile_xla`, and keeps what XLA
produced: ``stablehlo.mlir``, the optimised ``hlo.txt`` (layouts, fusions),
``cost.json`` and ``memory.json`` (XLA's own analyses), ``kernels.txt``. The
kernels are read from the optimised HLO; the named scope every IR op was traced
under (``ik.matmul#12[gpt2_block.py:30]``) maps each kernel back to IR op ids
and source locations.

- ``xla-cpu`` compiles and runs here (JAX's host backend).
- ``xla-gpu`` runs on an attached CUDA GPU; without one it compiles deviceless
  for an H100 when JAX's CUDA PJRT plugin is installed; else ``availability``
  says what to install.
- ``xla-tpu-*`` compile ahead of time through libtpu for one chip of that
  version and never run here.

Per kernel, ``bytes`` is what its operands and results occupy (from the HLO
shapes) and ``flops`` is counted the way XLA's HloCostAnalysis counts: 2·M·N·K
per dot or convolution, one per element for arithmetic elementwise ops and
reductions, transcendentals apart (``extra["transcendentals"]``). XLA itself
reports only whole-module figures, kept in ``info["cost_analysis"]``.
:func:`hlo_traffic` re-counts XLA's ``bytes accessed`` from the optimised HLO
(tiled sizes, VMEM prefetches counted on both halves of the copy), which is how
``benchmarks/tpu_cost.py`` explains where it parts from ``irkit estimate``.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from irkit.targets import xla_platform  # noqa: F401 - sets up libtpu's environment before JAX loads it
from irkit.targets.base import (
    Artifact,
    Availability,
    Kernel,
    Session,
    Target,
    TargetUnavailable,
    module_aliases,
    provenance,
)
from irkit.targets.hlo_text import attr_value, parse_hlo_module, parse_shapes
from irkit.targets.ir_scope import parse_ir_scopes
from irkit.targets.registry import register_target
from irkit.targets.xla_lower import (
    XLA_RULES,
    LoweredFunction,
    LoweringError,
    LowerOptions,
    lower_to_jax,
)

from irkit.interp import default_bindings
from irkit.ir.core import Module
from irkit.ir.types import eval_dim

__all__ = ["HloTraffic", "XlaExecutable", "XlaSession", "XlaTarget", "hlo_input_output_alias", "hlo_traffic",
           "kernel_costs", "padded_bytes"]


_SUMMARIES = {
    "cpu": "XLA:CPU through JAX; compiles and runs here",
    "gpu": "XLA:GPU through JAX; runs on a CUDA GPU, else compiles deviceless for an H100 "
    "through the CUDA PJRT plugin",
}


class XlaTarget(Target):
    """Lower through JAX to XLA for one chip of ``platform``; run where the chip is here."""

    summary = "XLA through JAX: StableHLO, optimised HLO, kernels traced to IR ops"
    lowering_table = XLA_RULES
    """One rule table for every XLA platform (``irkit coverage`` reads it)."""

    def __init__(
        self,
        platform: str,
        spec: str,
        *,
        topology: str | None = None,
        precision: str = "default",
        pallas: bool = False,
        inline_limit: int = 64,
    ) -> None:
        """``platform``: ``cpu``, ``gpu`` or ``tpu-v4/v5e/v5p/v6e``. ``topology``: a TPU slice
        (``v5e:2x2``) or GPU name (``h100``, ``h200``, ``a100``) for deviceless compiles.
        ``precision``: dots and convolutions at ``default``, ``high`` or ``highest``.
        ``pallas``: lower matmuls with a ``tile`` attribute to the Pallas blocked kernel.
        ``inline_limit``: constants with more elements become parameters."""
        if precision not in ("default", "high", "highest"):
            raise ValueError(f"precision must be default, high or highest, got {precision!r}")
        self.platform = platform
        self.spec = spec  # type: ignore[misc]
        self.topology = topology
        self.precision = precision
        self.pallas = pallas
        self.inline_limit = inline_limit
        self.name = f"xla-{platform}"  # type: ignore[misc]
        if platform == "gpu" and topology in ("h100", "h200", "a100"):
            self.spec = topology  # type: ignore[misc]  # the deviceless compile's GPU is the one to estimate for
        tpu = f"XLA:TPU {platform[4:]}, one chip, ahead of time through libtpu"
        self.summary = _SUMMARIES.get(platform, tpu)  # type: ignore[misc]

    def with_options(self, **options: Any) -> XlaTarget:
        """A copy with some options changed (``pallas=True``, ``precision="highest"`` ...)."""
        kw: dict[str, Any] = {
            "topology": self.topology,
            "precision": self.precision,
            "pallas": self.pallas,
            "inline_limit": self.inline_limit,
        }
        kw.update(options)
        t = XlaTarget(self.platform, str(self.spec), **kw)
        t.name = self.name  # type: ignore[misc]
        return t

    # -- availability -------------------------------------------------------------------------
    def availability(self) -> Availability:
        try:
            import jax  # noqa: F401
        except ImportError:
            return Availability(False, False, "jax is not installed: pip install 'irkit[jax]'")
        from irkit.targets import xla_platform as xp

        if self.platform == "cpu":
            return Availability(True, True)
        if self.platform == "gpu":
            if xp.attached_gpu() is not None:
                return Availability(True, True)
            try:
                xp.gpu_device(self.topology or "h100")
            except (xp.XlaUnavailable, ValueError) as e:
                return Availability(False, False, str(e))
            return Availability(
                True,
                False,
                "no CUDA GPU attached; compiles deviceless for "
                f"{self.topology or 'h100'} through the CUDA PJRT plugin",
            )
        try:
            _, topo = xp.tpu_device(self.platform, self.topology)
        except (xp.XlaUnavailable, ValueError) as e:
            return Availability(False, False, str(e))
        return Availability(
            True, False, f"no TPU attached; compiles ahead of time for {topo} through libtpu"
        )

    # -- lower ----------------------------------------------------------------------------------
    def lower_jax(
        self, module: Module, bindings: Mapping[str, int] | None = None
    ) -> LoweredFunction:
        """The module as a JAX-traceable function at ``bindings`` (no compile)."""
        b = default_bindings(module.entry, bindings)
        opts = LowerOptions(
            platform=self.platform,
            precision=self.precision,
            pallas=self.pallas,
            inline_limit=self.inline_limit,
        )
        return lower_to_jax(module, b, opts)

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        try:
            import jax
        except ImportError:
            raise TargetUnavailable(
                f"{self.name}: jax is not installed: pip install 'irkit[jax]'"
            ) from None
        from irkit.targets import xla_compile as xc

        xla_platform.prefer_inline_cpu_dispatch()  # before tracing can initialise JAX's backends
        lf = self.lower_jax(module, bindings)
        aliases = _checked_aliases(module, lf, self.name)
        donate = sorted(set(aliases.values()))
        order = _output_order(module, lf, aliases)
        fn = lf.fn
        if order is not None:
            fn = _reordered(lf.fn, order)
        try:
            with jax.enable_x64(True), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                art = xc.compile_xla(fn, lf.arg_specs, self.platform, topology=self.topology,
                                     donate=donate)
        except xc.XlaUnavailable as e:
            raise TargetUnavailable(str(e)) from e
        except xc.XlaCompileError as e:
            raise LoweringError(str(e)) from e
        notes = list(lf.notes)
        for w in caught:  # e.g. "Some donated buffers were not usable": kept as a note, not printed
            notes.append(f"jax: {str(w.message).splitlines()[0]}")
        io_alias = hlo_input_output_alias(art.hlo)
        if order is not None:  # HLO output j is the function's output order[j]
            io_alias = {order[j]: a for j, a in io_alias.items()}
        if aliases and io_alias != aliases:
            notes.append(f"XLA paired donated buffers as {io_alias} (output: argument), the function's "
                         f"aliases are {aliases}; outputs still update their own arguments")

        hlo_kernels = art.kernels()
        costs = kernel_costs(art.hlo)
        weight_of = _weight_operands(art.hlo, lf)
        kernels: list[Kernel] = []
        for k in hlo_kernels:
            names = _kernel_ir_ops(k, lf) or weight_of.get(k.name, [])
            _, locs = provenance([lf.ops_by_id[n] for n in names], lf.ids)
            flops, nbytes, trans = costs.get(k.name, (None, None, None))
            extra: dict[str, Any] = {
                "ops": list(k.ops),
                "outputs": [str(s) for s in k.outputs],
                "operands": [str(s) for s in k.operands],
            }
            if k.backend_kind:
                extra["backend_kind"] = k.backend_kind
            if k.estimated_cycles is not None:
                extra["estimated_cycles"] = k.estimated_cycles
            if trans:
                extra["transcendentals"] = trans
            kernels.append(
                Kernel(
                    name=k.name,
                    kind=k.kind,
                    ir_ops=names,
                    locations=locs,
                    file="hlo.txt",
                    flops=flops,
                    bytes=nbytes,
                    extra=extra,
                )
            )

        files: dict[str, str | bytes] = {
            "stablehlo.mlir": art.stablehlo,
            "hlo.txt": art.hlo,
            "cost.json": json.dumps(art.cost, indent=2, sort_keys=True) + "\n",
            "memory.json": json.dumps(art.memory, indent=2, sort_keys=True) + "\n",
            "kernels.txt": xc.format_kernels(hlo_kernels) + "\n",
        }
        info: dict[str, Any] = {
            "platform": art.platform,
            "topology": art.topology,
            "device_kind": art.device_kind,
            "deviceless": art.deviceless,
            "cost_analysis": dict(art.cost),
            "memory_analysis": dict(art.memory),
            "lower_seconds": art.lower_seconds,
            "compile_seconds": art.compile_seconds,
            "versions": dict(art.versions),
            "precision": self.precision,
            "pallas": self.pallas,
            "weights": {
                "count": len(lf.weights),
                "bytes": int(sum(w.nbytes for w in lf.weights)),
                "names": list(lf.weight_names),
            },
            "notes": notes,
            "input_output_alias": {str(o): a for o, a in sorted(io_alias.items())},
        }
        if order is not None:
            info["hlo_output_order"] = list(order)
        runner = XlaExecutable(art, lf, donate, order) if art.runner is not None else None
        profiler = _make_profiler(runner, [k.name for k in kernels]) if runner and art.platform == "cpu" else None
        # The artifact's compile time is what a user waits for: trace + StableHLO + XLA.
        return Artifact(
            self.name,
            files,
            kernels,
            art.lower_seconds + art.compile_seconds,
            dict(lf.bindings),
            [tuple(s.shape) for s in lf.input_specs],
            info,
            runner,
            profiler,
            aliases=dict(aliases),
            arg_names=[a.name or f"arg{i}" for i, a in enumerate(module.entry.args)],
        )

    # -- run ------------------------------------------------------------------------------------
    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """NumPy in, NumPy out. On the CPU one call costs about what the compiled executable
        does on resident JAX arrays (see :class:`_StagedCall`); a wrong number or shape of
        inputs gets the base class's error."""
        runner = artifact.runner
        if isinstance(runner, XlaExecutable):
            st = runner.staged
            if st is not None:
                outs = st(inputs)
                if outs is not None:
                    return outs
        return super().run(artifact, inputs)

    # -- sessions -------------------------------------------------------------------------------
    def open_session(self, artifact: Artifact, aliases: Mapping[int, int] | None = None) -> XlaSession:
        """A session whose bound and aliased arguments stay on the device as JAX arrays; an aliased
        argument's buffer is donated to the call and the output that overwrites it takes its place."""
        if not isinstance(artifact.runner, XlaExecutable):
            av = self.availability()
            raise TargetUnavailable(f"target '{self.name}' cannot run here: {av.reason or 'compile-only artifact'}")
        return XlaSession(self, artifact, aliases)


for _name, _platform, _spec in (
    ("xla-cpu", "cpu", "host-cpu"),
    ("xla-gpu", "gpu", "h100"),
    ("xla-tpu-v4", "tpu-v4", "tpu-v4"),
    ("xla-tpu-v5e", "tpu-v5e", "tpu-v5e"),
    ("xla-tpu-v5p", "tpu-v5p", "tpu-v5p"),
    ("xla-tpu-v6e", "tpu-v6e", "tpu-v6e"),
):
    register_target(_name, platform=_platform, spec=_spec)(XlaTarget)


def _kernel_ir_ops(k: Any, lf: LoweredFunction) -> list[str]:
    """IR op ids of a kernel: every IR scope (outer fused ops too) in its ops' names."""
    out: list[str] = []
    for name in k.op_names:
        for s in parse_ir_scopes(name):
            oid = f"{s.op}#{s.id}"
            if oid in lf.ops_by_id and oid not in out:
                out.append(oid)
    return out


def _weight_operands(hlo: str, lf: LoweredFunction) -> dict[str, list[str]]:
    """``kernel name -> ik.constant ids`` of the weights an entry instruction reads.

    XLA's own copies of weights (TPU prefetches into VMEM, layout changes) carry no
    metadata; the parameter they read names the constant. JAX names the parameters of
    ``f(*args)`` ``args_N_``.
    """
    mod = parse_hlo_module(hlo)
    if mod.entry is None:
        return {}
    n_in = len(lf.input_specs)
    param: dict[str, int] = {}
    for ins in mod.computations[mod.entry]:
        m = re.match(r"args_(\d+)_", ins.name)
        if ins.opcode == "parameter" and m:
            param[ins.name] = int(m.group(1))
    out: dict[str, list[str]] = {}
    for ins in mod.computations[mod.entry]:
        ids: list[str] = []
        for o in ins.operands:
            k = param.get(o, -1) - n_in
            if 0 <= k < len(lf.weight_ops):
                ids += [i for i in lf.weight_ops[k] if i not in ids]
        if ids:
            out[ins.name] = ids
    return out


def _checked_aliases(module: Module, lf: LoweredFunction, target: str) -> dict[int, int]:
    """The entry function's ``aliases`` (output -> argument), each pair checked to have the same type
    at these dim values: XLA can only give an output the buffer of an argument of its shape and dtype."""
    aliases = module_aliases(module)
    fn = module.entry
    for o, a in sorted(aliases.items()):
        if not 0 <= a < len(lf.input_specs) or not 0 <= o < len(fn.outputs):
            raise LoweringError(f"{target}: function '{fn.name}': alias output {o} -> argument {a} is out of "
                                f"range ({len(fn.outputs)} outputs, {len(lf.input_specs)} arguments); fix the "
                                "function's 'aliases' attribute")
        spec = lf.input_specs[a]
        out_t = fn.outputs[o].type
        shape = tuple(eval_dim(d, lf.bindings) for d in out_t.shape)
        if shape != tuple(spec.shape) or np.dtype(out_t.dtype.np) != np.dtype(spec.dtype):
            raise LoweringError(f"{target}: function '{fn.name}': alias output {o} -> argument {a}: output is "
                                f"{np.dtype(out_t.dtype.np)}{list(shape)}, argument is {np.dtype(spec.dtype)}"
                                f"{list(spec.shape)}; an output can only overwrite an argument of its type")
    return aliases


def _jax_pairing(outs: Sequence[tuple], ins: Sequence[tuple], donated: Sequence[int]) -> dict[int, int]:
    """How ``jax.jit`` pairs donated arguments with outputs: each output, in order, takes the
    first donated argument of its shape and dtype not yet taken."""
    free: dict[tuple, list[int]] = {}
    for a in sorted(donated):
        free.setdefault(ins[a], []).append(a)
    pairs: dict[int, int] = {}
    for i, key in enumerate(outs):
        if free.get(key):
            pairs[i] = free[key].pop(0)
    return pairs


def _output_order(module: Module, lf: LoweredFunction, aliases: Mapping[int, int]) -> list[int] | None:
    """None when JAX's pairing of donated buffers already gives every aliased output its own
    argument; else an order of the outputs (aliased ones first, by argument) under which it does."""
    if not aliases:
        return None
    outs = [(tuple(eval_dim(d, lf.bindings) for d in v.type.shape), np.dtype(v.type.dtype.np))
            for v in module.entry.outputs]
    ins = [(tuple(s.shape), np.dtype(s.dtype)) for s in lf.input_specs]
    if _jax_pairing(outs, ins, list(aliases.values())) == dict(aliases):
        return None
    first = sorted(aliases, key=lambda o: aliases[o])
    order = first + [i for i in range(len(outs)) if i not in aliases]
    return order


def _reordered(fn: Any, order: Sequence[int]) -> Any:
    """``fn`` returning its outputs in ``order`` (same name, so the HLO's op names stay)."""

    def reordered(*args: Any) -> Any:
        outs = fn(*args)
        return tuple(outs[i] for i in order)

    reordered.__name__ = reordered.__qualname__ = getattr(fn, "__name__", "fn")
    return reordered


def hlo_input_output_alias(hlo_text: str) -> dict[int, int]:
    """``{output index: parameter number}`` from an HLO module's ``input_output_alias`` header
    (``input_output_alias={ {0}: (3, {}, may-alias) }``); empty when nothing is aliased."""
    head = hlo_text.split("\n", 1)[0]
    m = re.search(r"input_output_alias=\{(.*?)\}\s*(?:,\s*[a-z_]+=|$)", head)
    if not m:
        return {}
    return {int(o): int(p) for o, p in re.findall(r"\{(\d+)\}:\s*\((\d+),", m.group(1))}


class XlaExecutable:
    """The compiled executable with the lifted weights resident on the device: NumPy in, NumPy out.

    It is the artifact's ``runner`` (what :meth:`Target.run` calls) and what an
    :class:`XlaSession` calls with its resident JAX arrays; ``donate`` lists the argument
    positions whose buffers the executable consumes (the function's aliased arguments)."""

    def __init__(self, art: Any, lf: LoweredFunction, donate: Sequence[int] = (),
                 order: Sequence[int] | None = None) -> None:
        import jax
        from irkit.targets.xla_platform import cpu_device

        self.target = art.target
        self.platform = art.platform
        self.device = cpu_device() if art.platform == "cpu" else None
        with jax.enable_x64(True):
            self.weights = [jax.device_put(w, self.device) for w in lf.weights]
        if self.device is None and self.weights:
            self.device = next(iter(self.weights[0].devices()))
        self.dtypes = [np.dtype(s.dtype) for s in lf.input_specs]
        self.shapes = [tuple(s.shape) for s in lf.input_specs]
        self.compiled = art.runner
        # JAX canonicalises 64-bit NumPy inputs to 32 bits unless x64 is on; only pay for the
        # switch (a context manager per call) where an argument is 64-bit.
        self.needs_x64 = any(dt.itemsize == 8 for dt in self.dtypes) or any(
            np.dtype(w.dtype).itemsize == 8 for w in self.weights)
        self.donate = frozenset(donate)
        # The executable returns output order[j] at position j (see _output_order); undo it.
        self.unorder = None if order is None else [list(order).index(i) for i in range(len(order))]
        self._staged: Any = _UNBUILT

    def put(self, array: np.ndarray, index: int) -> Any:
        """``array`` on the device as argument ``index``'s dtype."""
        import jax

        with jax.enable_x64(True):
            return jax.device_put(np.asarray(array).astype(self.dtypes[index], copy=False), self.device)

    def call(self, args: Sequence[Any]) -> list[Any]:
        """One call on NumPy or JAX arrays (one per input); the outputs stay JAX arrays."""
        if self.needs_x64:
            import jax

            with jax.enable_x64(True):
                outs = self.compiled(*args, *self.weights)
        else:
            outs = self.compiled(*args, *self.weights)
        if self.unorder is None:
            return list(outs)
        return [outs[j] for j in self.unorder]

    @property
    def engine(self) -> _XlaEngine | None:
        """The bare executable call on arguments already on the device (``prepare`` then ``call``),
        for :func:`irkit.breakdown.breakdown`; None where a call consumes donated arguments."""
        return None if self.donate else _XlaEngine(self)

    @property
    def staged(self) -> _StagedCall | None:
        """The NumPy-in/NumPy-out fast path (see :class:`_StagedCall`), built on first use; None
        where it does not apply (not the CPU, donated arguments, effects, no zero-copy buffers)."""
        st = self._staged
        if st is _UNBUILT:
            st = self._staged = _StagedCall.build(self)
        return st  # type: ignore[return-value]

    def __call__(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        st = self.staged
        if st is not None:
            outs = st(xs)
            if outs is not None:
                return outs
        if len(xs) != len(self.dtypes):
            raise TargetUnavailable(f"{self.target}: expected {len(self.dtypes)} inputs, got {len(xs)}")
        args = [np.asarray(x).astype(dt, copy=False) for x, dt in zip(xs, self.dtypes)]
        return [np.asarray(o) for o in self.call(args)]


_UNBUILT = object()


class _XlaEngine:
    """``XlaExecutable.engine``: JAX's compiled executable on resident JAX arrays, waited for."""

    def __init__(self, exe: XlaExecutable) -> None:
        self.exe = exe

    def prepare(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        return [self.exe.put(x, i) for i, x in enumerate(inputs)]

    def call(self, prepared: Sequence[Any]) -> list[Any]:
        outs = self.exe.call(prepared)
        for o in outs:
            o.block_until_ready()
        return outs


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype, align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary
    (what XLA:CPU needs to use host memory as a buffer without copying it)."""
    n = math.prod(shape) * dtype.itemsize
    raw = np.empty(n + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dtype).reshape(shape)


class _StagedCall:
    """``Target.run``'s fast path on ``xla-cpu``: NumPy in, NumPy out, one executable call.

    JAX's own dispatch of NumPy arguments costs a host-to-device transfer per argument and
    per call (~4 us each on a 2-core EPYC), more than the whole executable on a small graph.
    Here every input gets one 64-byte aligned NumPy staging buffer that XLA:CPU uses as the
    argument's device buffer without copying (``HostBufferSemantics.ZERO_COPY``, checked once
    by comparing the pointers); a call copies each input into its staging buffer (casting to
    the argument's dtype as ``astype`` does), runs the loaded executable directly
    (``execute_sharded``, weights resident), and returns NumPy views of the output buffers,
    which is what ``np.asarray`` of a JAX CPU array gives. Reading the outputs waits for the
    computation, so the staging buffers are free again when a call returns; a lock keeps a
    second thread on the ordinary path while one call uses them."""

    __slots__ = ("args", "execute", "handlers", "lock", "stage")

    def __init__(self, stage: list[np.ndarray], args: list[Any], execute: Any, handlers: list[Any]) -> None:
        import threading

        self.stage = stage
        self.args = args
        self.execute = execute
        self.handlers = handlers
        self.lock = threading.Lock()

    @classmethod
    def build(cls, exe: XlaExecutable) -> _StagedCall | None:
        if exe.platform != "cpu" or exe.donate or exe.unorder is not None or exe.device is None:
            return None
        try:
            from jax._src.interpreters import pxla
            from jax._src.lib import _jax
            from jax.sharding import SingleDeviceSharding
        except ImportError:  # another JAX layout: the ordinary path
            return None
        compiled = exe.compiled
        params = getattr(compiled, "_params", None)
        call = getattr(getattr(compiled, "_executable", None), "unsafe_call", None)
        if (params is None or getattr(params, "const_args", None) or not isinstance(call, pxla.ExecuteReplicated)
                or call.ordered_effects or call.has_unordered_effects or call.has_host_callbacks
                or call.mut is not None or not call.out_handler.handlers):
            return None
        n_in = len(exe.shapes)
        avals = params.in_types[1] if isinstance(getattr(params, "in_types", None), tuple) else None
        if avals is None or len(avals) != n_in + len(exe.weights):
            return None
        sharding = SingleDeviceSharding(exe.device)
        stage: list[np.ndarray] = []
        flat: list[Any] = []
        for i, (shape, dt) in enumerate(zip(exe.shapes, exe.dtypes)):
            buf = _aligned_empty(shape, dt)
            buf[...] = 0
            if buf.size == 0:
                return None
            try:
                arr = _jax.batched_device_put(avals[i], sharding, [buf], [exe.device], True, False,
                                              _jax.HostBufferSemantics.ZERO_COPY, True)
            except Exception:  # noqa: BLE001 - a dtype or layout this path does not cover
                return None
            if arr.unsafe_buffer_pointer() != buf.ctypes.data:
                return None  # XLA copied: updating the staging buffer would not reach it
            stage.append(buf)
            flat.append(arr)
        flat += exe.weights
        # JAX drops arguments the function does not read from the executable's parameters; their
        # staging buffers are still filled (and checked) but not passed.
        args = [flat[i] for i in sorted(call.kept_var_idx)]
        return cls(stage, args, call.xla_executable.execute_sharded, list(call.out_handler.handlers))

    def __call__(self, xs: Sequence[Any]) -> list[np.ndarray] | None:
        """The outputs, or None when this call must take the ordinary path (wrong number or
        shapes of inputs: that path raises the error; the stage in use by another thread)."""
        stage = self.stage
        if len(xs) != len(stage) or not self.lock.acquire(False):
            return None
        try:
            for x, buf in zip(xs, stage):
                if x.__class__ is not np.ndarray:
                    x = np.asarray(x)
                if x.shape != buf.shape:
                    return None
                np.copyto(buf, x, casting="unsafe")
            outs = self.execute(self.args).consume_with_handlers(self.handlers)
            return [np.asarray(o) for o in outs]
        finally:
            self.lock.release()


def _host_copy(x: Any) -> np.ndarray:
    """A NumPy copy of a JAX array that leaves no reference to its buffer behind: on the CPU
    ``np.asarray`` would view the buffer (and JAX caches that view), which stops the next call
    from donating it."""
    try:
        return np.array(np.from_dlpack(x), copy=True)
    except (TypeError, RuntimeError, BufferError, ValueError):  # a device buffer: a host copy anyway
        return np.asarray(x)


class XlaSession(Session):
    """Resident JAX arrays on the target's device; aliased arguments donated and updated in place.

    Bound arguments (weights, a prompt) are put on the device once. An aliased argument (a KV
    cache) is passed to the executable as a resident JAX array whose buffer XLA reuses for the
    output that overwrites it (``input_output_alias``), and that output becomes the argument of
    the next call: no host round trip and no copy of the cache per step. Each call goes straight
    to the compiled executable (JAX's C++ dispatch), with no tracing."""

    def __init__(self, target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None):
        super().__init__(target, artifact, aliases)
        exe = artifact.runner
        assert isinstance(exe, XlaExecutable)
        self.exe = exe
        self._vals: dict[int, Any] = {}
        # An argument the executable consumes but this session does not feed back (aliases given
        # here that differ from the compiled ones) is kept on the host and copied in per call.
        self._host_only = exe.donate - set(self.aliases.values())
        self._fed_back = sorted(self.aliases.items())

    def run(self, inputs: Sequence[np.ndarray | None], fetch: Sequence[int] | None = None) -> list[np.ndarray]:
        """One call (see :class:`~irkit.targets.base.Session`); the checks the base class makes, done
        inline: a serving loop calls this once per token."""
        vals, exe = self._vals, self.exe
        n = self.n_args
        if len(inputs) > n:
            return super().run(inputs, fetch)  # raises the base class's error
        args: list[Any] = []
        for i in range(n):
            x = inputs[i] if i < len(inputs) else None
            if x is None:
                v = vals.get(i)
                if v is None:
                    return super().run(inputs, fetch)  # raises: no resident value
                args.append(v)
            else:
                a = np.asarray(x)
                if a.shape != exe.shapes[i]:
                    return super().run(inputs, fetch)  # raises: wrong shape
                args.append(a.astype(exe.dtypes[i], copy=False))
        outs = self._call(args, fetch)
        self.calls += 1
        return outs

    def _has(self, index: int) -> bool:
        return index in self._vals

    def _bind(self, index: int, array: np.ndarray) -> None:
        if index in self._host_only:
            self._vals[index] = np.asarray(array).astype(self.exe.dtypes[index])
        else:
            self._vals[index] = self.exe.put(array, index)

    def _read(self, index: int) -> np.ndarray:
        v = self._vals[index]
        return np.array(v, copy=True) if isinstance(v, np.ndarray) else _host_copy(v)

    def _run(self, xs: list[np.ndarray | None], fetch: Sequence[int] | None) -> list[np.ndarray]:
        vals, dtypes = self._vals, self.exe.dtypes
        return self._call([vals[i] if x is None else x.astype(dtypes[i], copy=False) for i, x in enumerate(xs)],
                          fetch)

    def _call(self, args: list[Any], fetch: Sequence[int] | None) -> list[np.ndarray]:
        vals = self._vals
        outs = self.exe.call(args)
        for o, a in self._fed_back:
            vals[a] = outs[o] if a not in self._host_only else _host_copy(outs[o])
        picked = range(len(outs)) if fetch is None else fetch
        aliased = self.aliases
        return [_host_copy(outs[i]) if i in aliased else np.asarray(outs[i]) for i in picked]

    def close(self) -> None:
        for v in self._vals.values():
            if hasattr(v, "delete") and not v.is_deleted():
                v.delete()
        self._vals.clear()


def _make_profiler(runner: Any, names: Sequence[str], runs: int = 3) -> Any:
    """Seconds per HLO kernel from JAX's profiler: XLA's CPU runtime records each thunk it runs
    under its instruction's name (``ynn_fusion.3``, ``broadcast_divide_fusion``) on the host
    plane.  One warm-up run, then the mean over ``runs``."""
    wanted = frozenset(names)

    def profiler(xs: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        import tempfile
        from pathlib import Path

        import jax
        from jax.profiler import ProfileData

        runner(xs)
        with tempfile.TemporaryDirectory() as d:
            with jax.profiler.trace(d):
                for _ in range(runs):
                    runner(xs)
            traces = sorted(Path(d).rglob("*.xplane.pb"))
            if not traces:
                return []
            data = ProfileData.from_file(str(traces[-1]))
            total: dict[str, float] = {}
            for plane in data.planes:
                if plane.name != "/host:CPU":
                    continue
                for line in plane.lines:
                    for e in line.events:
                        if e.name in wanted:
                            total[e.name] = total.get(e.name, 0.0) + e.duration_ns * 1e-9
        return [(n, t / runs) for n, t in total.items()]

    return profiler


# --------------------------------------------------------------------------------------------
# Per-kernel FLOPs and bytes from the optimised HLO
# --------------------------------------------------------------------------------------------

_ITEMSIZE = {
    "pred": 1,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
}
_TRANSCENDENTAL = frozenset(
    {
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "tanh",
        "rsqrt",
        "sqrt",
        "cbrt",
        "power",
        "sine",
        "cosine",
        "tan",
        "atan2",
        "logistic",
        "erf",
    }
)
_FREE = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "reshape",
        "broadcast",
        "transpose",
        "copy",
        "slice",
        "dynamic-slice",
        "dynamic-update-slice",
        "concatenate",
        "pad",
        "iota",
        "gather",
        "scatter",
        "reverse",
        "copy-start",
        "copy-done",
        "fusion",
        "custom-call",
        "after-all",
        "opt-barrier",
        "bitcast-convert",
        "partition-id",
        "replica-id",
        "all-reduce",
        "all-gather",
        "send",
        "recv",
        "while",
        "conditional",
        "call",
    }
)


def _elems(shape_text: str) -> tuple[int, float]:
    """(elements of the first array, bytes of every array) in an HLO shape string."""
    shapes = parse_shapes(shape_text)
    first = int(np.prod(shapes[0].dims)) if shapes else 0
    nbytes = sum(float(np.prod(s.dims)) * _ITEMSIZE.get(s.dtype, 4) for s in shapes)
    return first, nbytes


def _dims(shape_text: str) -> tuple[int, ...]:
    shapes = parse_shapes(shape_text)
    return shapes[0].dims if shapes else ()


def _instr_cost(
    mod: Any, ins: Any, table: Mapping[str, Any], seen: set[str]
) -> tuple[float, float]:
    """(flops, transcendentals) of one instruction; a fusion counts its body."""
    op = ins.opcode
    out, _ = _elems(ins.shape)

    def operand_shape(i: int) -> str:
        return (
            table[ins.operands[i]].shape
            if len(ins.operands) > i and ins.operands[i] in table
            else ""
        )

    if op == "fusion":
        callee = attr_value(ins.attrs, "calls")
        return _computation_cost(mod, (callee or "").lstrip("%"), seen)
    if op == "dot":
        lhs = _dims(operand_shape(0))
        k = 1
        for d in re.findall(r"\d+", attr_value(ins.attrs, "lhs_contracting_dims") or ""):
            k *= lhs[int(d)] if int(d) < len(lhs) else 1
        return 2.0 * out * k, 0.0
    if op == "convolution":
        rhs = _dims(operand_shape(1))
        m = re.match(r"[^_]*_([^-]*)->", attr_value(ins.attrs, "dim_labels") or "")
        o = m.group(1).find("o") if m else -1
        if rhs and 0 <= o < len(rhs) and rhs[o]:
            return 2.0 * out * float(np.prod(rhs)) / rhs[o], 0.0
        return 0.0, 0.0
    if op in ("reduce", "reduce-window"):
        src, _ = _elems(operand_shape(0)) if operand_shape(0) else (0, 0.0)
        return float(max(src - out, 0)), 0.0
    if op in _TRANSCENDENTAL:
        return 0.0, float(out)
    if op in _FREE:
        return 0.0, 0.0
    return float(out), 0.0


def _computation_cost(mod: Any, comp: str, seen: set[str]) -> tuple[float, float]:
    """(flops, transcendentals) of one computation, nested fusions included."""
    if comp in seen or comp not in mod.computations:
        return 0.0, 0.0
    seen.add(comp)
    instrs = mod.computations[comp]
    table = {i.name: i for i in instrs}
    flops = trans = 0.0
    for ins in instrs:
        f, t = _instr_cost(mod, ins, table, seen)
        flops, trans = flops + f, trans + t
    return flops, trans


def kernel_costs(hlo_text: str) -> dict[str, tuple[float | None, float, float]]:
    """``kernel name -> (flops, bytes, transcendentals)`` for the entry computation's kernels.

    FLOPs follow XLA's HloCostAnalysis conventions (see the module docstring); a custom call
    (a Pallas kernel, a library call) has None FLOPs: its body is opaque. Bytes are the
    kernel's operands plus results.
    """
    mod = parse_hlo_module(hlo_text)
    out: dict[str, tuple[float | None, float, float]] = {}

    def walk(comp: str, visited: set[str]) -> None:
        if comp in visited or comp not in mod.computations:
            return
        visited.add(comp)
        table = {i.name: i for i in mod.computations[comp]}
        for ins in mod.computations[comp]:
            if ins.opcode in ("while", "conditional", "call"):
                for key in ("body", "condition", "to_apply", "branch_computations", "calls"):
                    v = attr_value(ins.attrs, key)
                    for callee in re.findall(r"%?([\w.\-]+)", (v or "").strip("{}")):
                        walk(callee, visited)
                continue
            _, out_bytes = _elems(ins.shape)
            in_bytes = sum(_elems(table[o].shape)[1] for o in ins.operands if o in table)
            if ins.opcode == "copy-start":
                out_bytes = in_bytes  # its result tuple repeats the source beside the destination
            if ins.opcode == "custom-call":
                flops: float | None = None
                trans = 0.0
            else:
                flops, trans = _instr_cost(mod, ins, table, set())
            out[ins.name] = (flops, in_bytes + out_bytes, trans)

    if mod.entry is not None:
        walk(mod.entry, set())
    return out


_NO_TRAFFIC = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "after-all",
        "bitcast",
        "add-dependency",
    }
)
_ASYNC_MOVES = frozenset({"copy-start", "copy-done", "slice-start", "slice-done"})
_LAYOUT_OPS = frozenset(
    {"copy", "reshape", "transpose", "broadcast", "slice", "concatenate", "pad"}
)


def padded_bytes(shape: Any) -> float:
    """Bytes of an HLO array (:class:`~irkit.targets.hlo_text.HloShape`) at its tiled size:
    in layout order, the minor dims rounded up to the outer tile (``T(8,128)``: the second
    most minor dim to 8, the most minor to 128)."""
    dims = list(shape.dims)
    if shape.minor_to_major is not None and shape.tiles and dims:
        phys = [dims[i] for i in reversed(shape.minor_to_major) if i < len(dims)]
        for j, t in enumerate(reversed(shape.tiles[0])):
            i = len(phys) - 1 - j
            if i >= 0 and t > 0:
                phys[i] = math.ceil(phys[i] / t) * t
        dims = phys
    return math.prod(dims) * _ITEMSIZE.get(shape.dtype, 4)


@dataclass
class HloTraffic:
    """The entry computation's memory traffic, re-counted from the optimised HLO text."""

    logical: float = 0.0
    """Operands + results of every kernel at their logical sizes, each copied array once."""
    padded: float = 0.0
    """The same at tiled sizes, with a VMEM prefetch counted on both ``copy-start`` and
    ``copy-done`` (a read and a write each): the rules XLA's TPU ``bytes accessed`` follows."""
    prefetch: float = 0.0
    """Part of ``padded`` in asynchronous copies and slices into VMEM (start + done)."""
    layout: float = 0.0
    """Part of ``padded`` in ops that move data without computing (copy, reshape, transpose...)."""
    bf16_results: int = 0
    """Kernels whose result XLA keeps in bf16."""


def hlo_traffic(hlo_text: str) -> HloTraffic:
    """Re-count the bytes the entry computation's kernels read and write (bitcasts are free)."""
    mod = parse_hlo_module(hlo_text)
    out = HloTraffic()
    if mod.entry is None:
        return out
    instrs = mod.computations[mod.entry]
    table = {i.name: i for i in instrs}

    def logical(sh: Any) -> float:
        return float(np.prod(sh.dims)) * _ITEMSIZE.get(sh.dtype, 4)

    for ins in instrs:
        if ins.opcode in _NO_TRAFFIC or (
            ins.opcode == "custom-call" and '"ConcatBitcast"' in ins.attrs
        ):
            continue  # ConcatBitcast: slices already adjacent in VMEM viewed as one array
        results = list(parse_shapes(ins.shape))
        operands = [sh for o in ins.operands if o in table for sh in parse_shapes(table[o].shape)]
        if ins.opcode in _ASYNC_MOVES:
            # An asynchronous copy or slice into VMEM: each half of the pair (start, done)
            # moves the destination array once, a read and a write. copy-start's result is
            # (destination, source, sync flag); slice-start's is ((source), destination, flag).
            dest = results[1:2] if ins.opcode == "slice-start" else results[:1]
            moved = 2 * sum(padded_bytes(sh) for sh in dest)
            out.padded += moved
            out.prefetch += moved
            if ins.opcode.endswith("-start"):
                out.logical += 2 * sum(logical(sh) for sh in dest)
            continue
        pb = sum(padded_bytes(sh) for sh in results + operands)
        out.padded += pb
        out.logical += sum(logical(sh) for sh in results + operands)
        if ins.opcode in _LAYOUT_OPS:
            out.layout += pb
        if any(sh.dtype == "bf16" for sh in results):
            out.bf16_results += 1
    return out
