"""Sweep specifications (TOML) and their expansion into tasks.

A spec names axes and measurements; the sweep is their cartesian product minus
the ``exclude`` rules::

    name = "smoke"
    models = ["mlp.mlir", "blocks.py:torch_block", "zoo:gpt2:toy"]
    frontends = ["auto"]                  # auto | torch | jax | stablehlo (FILE.py:FACTORY models)
    pipelines = ["", "canonicalize,fuse-attention,cse"]
    targets = ["reference", "xla-cpu", "ort", "tvm-llvm"]
    dtypes = ["f32"]                      # f32: as imported; bf16/f16: + mixed-precision{compute=...}
    measurements = ["estimate", "check", "bench"]
    shapes = [{B = 1, S = 8}, {B = 2, S = 16}]
    tiles = ["default", [32, 128, 128], {m = [32, 64], n = [256], k = [128, 256]}]   # matmul tiles

    [[exclude]]
    measurement = "bench"
    target = "reference"

Paths in ``models`` are relative to the spec file.  See docs/sweeps.md.
"""

from __future__ import annotations

import fnmatch
import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irkit.errors import InputError

MEASUREMENTS = ("estimate", "check", "bench", "generate")
FRONTENDS = ("auto", "torch", "jax", "stablehlo", "onnx")
DTYPES = ("f32", "bf16", "f16")

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "estimate": {},
    "check": {"seed": 0},
    "bench": {"warmup": 2, "repeats": 10, "max_seconds": 5.0},
    "generate": {"prompt_len": 8, "new_tokens": 16, "batch": 1, "max_cache_len": 0, "warmup_tokens": 3, "seed": 0},
}
"""Each measurement's options (a spec's ``[bench]``, ``[generate]``, ... tables override them).
``generate``: ``max_cache_len`` 0 is the model's default; ``warmup_tokens`` are generated once
before the timed run."""

Tile = tuple[int, int, int]
"""A matmul tile, (tile_m, tile_n, tile_k): what ``tile-matmul`` records in a matmul's ``tile``
attribute and the ``tvm-llvm`` matmul kernel reads."""

_TOP_KEYS = {"name", "models", "frontends", "pipelines", "targets", "dtypes", "measurements", "shapes", "exclude",
             "timeout", "retries", "seed", "estimate", "check", "bench", "generate", "hardware", "tiles"}


@dataclass(frozen=True)
class Task:
    """One cell of a sweep: a model, how it is built, where it runs, and what is measured."""

    model: str
    """The model as the spec names it (relative paths kept as written)."""
    source: str
    """What to import: an absolute path, ``FILE.py:FACTORY`` with an absolute file, or ``zoo:...``."""
    frontend: str
    pipeline: str
    dtype: str
    target: str
    measurement: str
    bindings: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, Any], ...]
    tile: Tile | None = None
    """The tile set on every matmul after the pipeline; None keeps what the pipeline left."""

    def axis(self, name: str) -> Any:
        if name in ("model", "frontend", "pipeline", "dtype", "target", "measurement"):
            return getattr(self, name)
        if name == "tile":
            return tile_name(self.tile)
        return dict(self.bindings).get(name)

    @property
    def options(self) -> dict[str, Any]:
        """The task's options beyond the pipeline (part of its key): the matmul tile."""
        return {"tile": list(self.tile)} if self.tile else {}

    @property
    def full_pipeline(self) -> str:
        """The pipeline with the dtype's precision pass appended."""
        parts = [self.pipeline] if self.pipeline else []
        if self.dtype != "f32":
            parts.append(f"mixed-precision{{compute={self.dtype}}}")
        return ",".join(parts)

    def label(self) -> str:
        b = ",".join(f"{k}={v}" for k, v in self.bindings)
        return (f"{self.measurement} {self.model} [{self.frontend}] | {self.full_pipeline or '-'} | {self.target}"
                + (f" | {b}" if b else "") + (f" | tile={tile_name(self.tile)}" if self.tile else ""))


@dataclass
class SweepSpec:
    """A parsed sweep spec."""

    name: str
    path: Path
    models: list[str]
    frontends: list[str]
    pipelines: list[str]
    targets: list[str]
    dtypes: list[str]
    measurements: list[str]
    shapes: list[dict[str, int]]
    hardware: list[str]
    """Hardware specs estimated in addition to the targets' own (tpu-v5e, h100, ...)."""
    exclude: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    tiles: list[Tile | None] = field(default_factory=lambda: [None])
    """Matmul tiles to measure each task with (None: as the pipeline leaves them)."""
    timeout: float = 600.0
    retries: int = 2

    def source_of(self, model: str) -> str:
        """The import source of ``model``, relative paths resolved against the spec's folder."""
        if model.startswith("zoo:"):
            return model
        base = self.path.parent
        if ":" in model and model.rsplit(":", 1)[0].endswith(".py"):
            f, fac = model.rsplit(":", 1)
            return f"{(base / f).resolve()}:{fac}"
        return str((base / model).resolve())

    def excluded(self, t: Task) -> bool:
        for rule in self.exclude:
            if all(_matches(t.axis(k), v) for k, v in rule.items()):
                return True
        return False

    def tasks(self) -> list[Task]:
        """Every task of the sweep, in a stable order (the cartesian product minus exclusions)."""
        out: list[Task] = []
        seen: set[Task] = set()
        for model, fe, pipe, dt, meas, shape, tile in itertools.product(
                self.models, self.frontends, self.pipelines, self.dtypes, self.measurements, self.shapes, self.tiles):
            targets = list(self.targets)
            if meas == "estimate":
                targets += [h for h in self.hardware if h not in targets]
                if tile is not None:
                    continue  # the analytic estimate does not model tiles
            if meas == "generate":
                shape = {}  # generation takes its sizes from [generate]; one task, not one per shape
            src = self.source_of(model)
            if not is_factory(src):
                if fe != self.frontends[0]:
                    continue  # a file's format decides its frontend: one task, frontend "auto"
                fe = "auto"
            for tgt in targets:
                t = Task(model, src, fe, pipe, dt, tgt, meas, tuple(sorted(shape.items())),
                         tuple(sorted(self.params.get(meas, {}).items())), tile)
                if not self.excluded(t) and t not in seen:
                    seen.add(t)
                    out.append(t)
        return out


def tile_name(tile: Tile | None) -> str:
    """``64x256x256`` (m x n x k), or ``default``: how exclude rules and reports name a tile."""
    return "default" if tile is None else "x".join(str(v) for v in tile)


def parse_tiles(raw: Any, path: Path) -> list[Tile | None]:
    """The ``tiles`` axis: a list of ``"default"``, ``[m, n, k]`` and tile spaces ``{m = [...], n = [...],
    k = [...]}`` (their product); a single entry may stand alone.  Duplicates are dropped, order kept."""
    entries = raw if isinstance(raw, list) and not (len(raw) == 3 and all(isinstance(v, int) for v in raw)) \
        else [raw]
    if not entries:
        raise InputError(f"{path}: 'tiles' must not be empty; use [\"default\"] or leave it out")
    out: list[Tile | None] = []

    def positive(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    for e in entries:
        if e == "default":
            cands: list[Tile | None] = [None]
        elif isinstance(e, list) and len(e) == 3 and all(positive(v) for v in e):
            cands = [(int(e[0]), int(e[1]), int(e[2]))]
        elif isinstance(e, dict) and set(e) <= {"m", "n", "k"} and e:
            axes = []
            for name in ("m", "n", "k"):
                vs = e.get(name)
                if vs is None:
                    raise InputError(f"{path}: tiles: the tile space {e!r} has no '{name}' (give m, n and k lists)")
                vs = vs if isinstance(vs, list) else [vs]
                if not vs or not all(positive(v) for v in vs):
                    raise InputError(f"{path}: tiles: '{name}' = {e[name]!r} must be positive integers")
                axes.append([int(v) for v in vs])
            cands = [(m, n, k) for m, n, k in itertools.product(*axes)]
        else:
            raise InputError(f"{path}: tiles: {e!r} is not a tile; use \"default\", [tile_m, tile_n, tile_k] of "
                             "positive integers, or a space like {m = [32, 64], n = [128, 256], k = [256]}")
        out += [c for c in cands if c not in out]
    return out


def is_factory(source: str) -> bool:
    """Whether ``source`` is ``FILE.py:FACTORY``."""
    return ":" in source and source.rsplit(":", 1)[0].endswith(".py")


def _matches(value: Any, pattern: Any) -> bool:
    if isinstance(pattern, list):
        return any(_matches(value, p) for p in pattern)
    if value is None:
        return False
    if isinstance(pattern, str) and isinstance(value, str):
        return fnmatch.fnmatchcase(value, pattern)
    return bool(value == pattern)


def _str_list(data: Mapping[str, Any], key: str, path: Path, default: list[str] | None = None) -> list[str]:
    v = data.get(key, default)
    if v is None:
        raise InputError(f"{path}: missing '{key}' (a list of strings)")
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or not v:
        raise InputError(f"{path}: '{key}' must be a non-empty list of strings")
    return list(v)


def load_spec(path: str | Path) -> SweepSpec:
    """Parse and check a sweep spec; every mistake is one :class:`InputError` naming the key."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such sweep spec") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: invalid TOML ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read ({e})") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise InputError(f"{path}: unknown key '{unknown[0]}'; a sweep spec has {', '.join(sorted(_TOP_KEYS))}")
    models = _str_list(data, "models", p)
    frontends = _str_list(data, "frontends", p, ["auto"])
    for f in frontends:
        if f not in FRONTENDS:
            raise InputError(f"{path}: frontends: unknown frontend '{f}'; choose from {', '.join(FRONTENDS)}")
    pipelines = _str_list(data, "pipelines", p, [""]) if data.get("pipelines") != [] else [""]
    targets = _str_list(data, "targets", p)
    dtypes = _str_list(data, "dtypes", p, ["f32"])
    for d in dtypes:
        if d not in DTYPES:
            raise InputError(f"{path}: dtypes: unknown dtype '{d}'; choose from {', '.join(DTYPES)}")
    meas = _str_list(data, "measurements", p, ["check"])
    for m in meas:
        if m not in MEASUREMENTS:
            raise InputError(f"{path}: measurements: unknown measurement '{m}'; choose from {', '.join(MEASUREMENTS)}")
    shapes_raw = data.get("shapes", [{}])
    if isinstance(shapes_raw, dict):
        shapes_raw = [dict(zip(shapes_raw, vs)) for vs in itertools.product(*shapes_raw.values())] \
            if all(isinstance(v, list) for v in shapes_raw.values()) else [shapes_raw]
    if not isinstance(shapes_raw, list) or not shapes_raw:
        raise InputError(f"{path}: 'shapes' must be a list of tables like {{B = 1, S = 8}}")
    shapes: list[dict[str, int]] = []
    for s in shapes_raw:
        if not isinstance(s, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                              for v in s.values()):
            raise InputError(f"{path}: shapes: {s!r} must be a table of positive integers, like {{B = 1, S = 8}}")
        shapes.append({str(k): int(v) for k, v in s.items()})
    hardware = _str_list(data, "hardware", p, []) if data.get("hardware") else []
    exclude = data.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(r, dict) and r for r in exclude):
        raise InputError(f"{path}: 'exclude' must be an array of tables ([[exclude]] with axis = value lines)")
    params: dict[str, dict[str, Any]] = {k: dict(v) for k, v in DEFAULT_PARAMS.items()}
    for m in MEASUREMENTS:
        sect = data.get(m, {})
        if not isinstance(sect, dict):
            raise InputError(f"{path}: [{m}] must be a table")
        for k, v in sect.items():
            if k not in params[m]:
                raise InputError(f"{path}: [{m}] unknown option '{k}'; options: "
                                 f"{', '.join(params[m]) or '(none)'}")
            if not isinstance(v, type(params[m][k])) and not (isinstance(v, int) and isinstance(params[m][k], float)):
                raise InputError(f"{path}: [{m}] {k} must be a {type(params[m][k]).__name__}")
            if m == "generate" and (v < 0 or (v == 0 and k not in ("max_cache_len", "warmup_tokens", "seed"))):
                raise InputError(f"{path}: [generate] {k} must be {'>= 0' if k == 'max_cache_len' else '>= 1'}, "
                                 f"got {v}")
            params[m][k] = v
    if "seed" in data:
        params["check"]["seed"] = int(data["seed"])
        if "seed" not in data.get("generate", {}):
            params["generate"]["seed"] = int(data["seed"])
    timeout = data.get("timeout", 600)
    retries = data.get("retries", 2)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InputError(f"{path}: 'timeout' must be a positive number of seconds per task")
    if not isinstance(retries, int) or retries < 0:
        raise InputError(f"{path}: 'retries' must be a non-negative integer")
    tiles: list[Tile | None] = parse_tiles(data["tiles"], p) if "tiles" in data else [None]
    return SweepSpec(name=str(data.get("name", p.stem)), path=p.resolve(), models=models, frontends=frontends,
                     pipelines=pipelines, targets=targets, dtypes=dtypes, measurements=meas, shapes=shapes,
                     hardware=hardware, exclude=exclude, params=params, timeout=float(timeout), retries=retries,
                     tiles=tiles)


__all__ = ["DTYPES", "FRONTENDS", "MEASUREMENTS", "SweepSpec", "Task", "Tile", "load_spec", "parse_tiles", "tile_name"]
