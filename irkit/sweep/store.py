"""The results store: one SQLite file, every result keyed by content.

Design note: a task's key is a hash of everything that decides its result (the
IR text, pipeline, target and its options, dim values, measurement and its
options, the versions of irkit and the compilers, and, for measurements that
run on hardware, a description of that hardware).  The same task run twice is
the same row, so a sweep resumes by skipping keys that are already ``ok``, two
stores merge by key, and a row is never written twice.  Every attempt
(success, crash, timeout, lost worker) is appended to ``attempts``, so nothing
is lost when a retry overwrites a task's current status.

The file runs in WAL mode with a busy timeout, so several sweeps (or the
driver of a cluster sweep and a ``results query`` in another shell) can use it
at once; each write is one short transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from irkit.errors import InputError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key         TEXT PRIMARY KEY,
    status      TEXT NOT NULL,          -- ok | failed
    model       TEXT NOT NULL,
    frontend    TEXT NOT NULL,
    ir_hash     TEXT NOT NULL,
    pipeline    TEXT NOT NULL,
    target      TEXT NOT NULL,
    options     TEXT NOT NULL,          -- JSON: target options
    bindings    TEXT NOT NULL,          -- JSON: dim values
    measurement TEXT NOT NULL,          -- estimate | check | bench
    params      TEXT NOT NULL,          -- JSON: measurement options
    versions    TEXT NOT NULL,          -- JSON
    machine     TEXT NOT NULL,          -- JSON ({} for analytic measurements)
    commit_id   TEXT NOT NULL,          -- git commit of the irkit checkout, else irkit's version
    sweep       TEXT NOT NULL,
    result      TEXT NOT NULL,          -- JSON: the measurement's numbers
    error       TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    duration    REAL NOT NULL,          -- seconds of the last attempt
    worker      TEXT NOT NULL,
    finished    REAL NOT NULL           -- unix time
);
CREATE INDEX IF NOT EXISTS results_kind ON results (measurement, target);
CREATE TABLE IF NOT EXISTS attempts (
    key      TEXT NOT NULL,
    attempt  INTEGER NOT NULL,
    status   TEXT NOT NULL,             -- ok | failed | timeout | lost
    reason   TEXT NOT NULL,
    duration REAL NOT NULL,
    worker   TEXT NOT NULL,
    at       REAL NOT NULL,
    PRIMARY KEY (key, attempt)
);
CREATE TABLE IF NOT EXISTS builds (
    key      TEXT PRIMARY KEY,          -- model source, frontend, versions
    model    TEXT NOT NULL,
    frontend TEXT NOT NULL,
    ir_hash  TEXT NOT NULL,
    ir_text  TEXT NOT NULL,
    seconds  REAL NOT NULL,
    at       REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tuning (
    key      TEXT PRIMARY KEY,          -- target, kernel kind, shape signature, versions, machine
    target   TEXT NOT NULL,
    kernel   TEXT NOT NULL,
    shape    TEXT NOT NULL,             -- JSON
    config   TEXT NOT NULL,             -- JSON: the chosen parameters
    seconds  REAL NOT NULL,             -- measured median
    default_seconds REAL,               -- measured median of the default parameters
    ranked   INTEGER NOT NULL,          -- candidates ranked by the cost model
    measured INTEGER NOT NULL,          -- candidates timed
    at       REAL NOT NULL
);
"""

RESULT_COLUMNS = ("key", "status", "model", "frontend", "ir_hash", "pipeline", "target", "options", "bindings",
                  "measurement", "params", "versions", "machine", "commit_id", "sweep", "result", "error",
                  "attempts", "duration", "worker", "finished")
JSON_COLUMNS = frozenset({"options", "bindings", "params", "versions", "machine", "result"})


@dataclass
class ResultRow:
    """One task's current result."""

    key: str
    status: str
    model: str
    frontend: str
    ir_hash: str
    pipeline: str
    target: str
    options: dict[str, Any]
    bindings: dict[str, int]
    measurement: str
    params: dict[str, Any]
    versions: dict[str, str]
    machine: dict[str, Any]
    commit_id: str
    sweep: str
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    attempts: int = 1
    duration: float = 0.0
    worker: str = ""
    finished: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in RESULT_COLUMNS}


def _row_values(r: ResultRow) -> tuple[Any, ...]:
    return tuple(json.dumps(getattr(r, c), sort_keys=True) if c in JSON_COLUMNS else getattr(r, c)
                 for c in RESULT_COLUMNS)


def _row_from(values: Sequence[Any]) -> ResultRow:
    d = {c: (json.loads(v) if c in JSON_COLUMNS else v) for c, v in zip(RESULT_COLUMNS, values)}
    return ResultRow(**d)


class Store:
    """A results store (SQLite, WAL).  Open with ``Store(path)``; close with :meth:`close` or ``with``."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise InputError(f"{path}: no such results store; run `irkit sweep SPEC --store {path}` first")
        if self.path.exists() and self.path.is_dir():
            raise InputError(f"{path}: is a folder; a results store is one SQLite file")
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout = 60000")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self._begin()
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise InputError(f"{path}: not an irkit results store ({e}); give a new file name or an existing "
                             "store") from None
        v = self.db.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
        if v and int(v[0]) != SCHEMA_VERSION:
            raise InputError(f"{path}: results store schema {v[0]}, this irkit reads {SCHEMA_VERSION}; "
                             "use the irkit that wrote it or start a new store")

    def _begin(self) -> None:
        # IMMEDIATE takes the write lock up front, so two writers wait (busy_timeout) instead of
        # failing with "database is locked" at commit.
        self.db.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- results -----------------------------------------------------------

    def put(self, row: ResultRow, attempt_status: str | None = None) -> None:
        """Record one attempt of a task and make it the task's current result.

        A failed attempt never replaces an ``ok`` result of the same key (a merge or a
        concurrent sweep may have stored one meanwhile)."""
        self._begin()
        try:
            old = self.db.execute("SELECT status, attempts FROM results WHERE key=?", (row.key,)).fetchone()
            n = self.db.execute("SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE key=?",
                                (row.key,)).fetchone()[0]
            self.db.execute("INSERT INTO attempts VALUES (?,?,?,?,?,?,?)",
                            (row.key, n + 1, attempt_status or row.status, row.error, row.duration, row.worker,
                             row.finished or time.time()))
            row.attempts = n + 1
            if old is None or not (old[0] == "ok" and row.status != "ok"):
                self.db.execute(f"INSERT OR REPLACE INTO results VALUES ({','.join('?' * len(RESULT_COLUMNS))})",
                                _row_values(row))
            else:
                self.db.execute("UPDATE results SET attempts=? WHERE key=?", (n + 1, row.key))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def record_attempt(self, key: str, status: str, reason: str, duration: float, worker: str) -> None:
        """Log an attempt that produced no result row (a failed build)."""
        self._begin()
        n = self.db.execute("SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE key=?", (key,)).fetchone()[0]
        self.db.execute("INSERT INTO attempts VALUES (?,?,?,?,?,?,?)",
                        (key, n + 1, status, reason, duration, worker, time.time()))
        self.db.execute("COMMIT")

    def status_of(self, keys: Iterable[str]) -> dict[str, str]:
        """``key -> status`` for the keys that have a result."""
        out: dict[str, str] = {}
        ks = list(keys)
        for i in range(0, len(ks), 500):
            chunk = ks[i:i + 500]
            q = f"SELECT key, status FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            out.update(dict(self.db.execute(q, chunk).fetchall()))
        return out

    def rows(self, where: Mapping[str, str] | None = None) -> list[ResultRow]:
        """Every result, optionally filtered by column equality (``where={"target": "ort"}``)."""
        clauses, vals = [], []
        for k, v in (where or {}).items():
            if k not in RESULT_COLUMNS:
                raise InputError(f"--where {k}=...: unknown column; columns: {', '.join(RESULT_COLUMNS)}")
            clauses.append(f"{k} = ?")
            vals.append(v)
        q = f"SELECT {','.join(RESULT_COLUMNS)} FROM results"
        if clauses:
            q += " WHERE " + " AND ".join(clauses)
        return [_row_from(r) for r in self.db.execute(q + " ORDER BY key", vals).fetchall()]

    def attempts(self, key: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT key, attempt, status, reason, duration, worker, at FROM attempts"
        args: tuple[Any, ...] = ()
        if key:
            q += " WHERE key=?"
            args = (key,)
        cols = ("key", "attempt", "status", "reason", "duration", "worker", "at")
        return [dict(zip(cols, r)) for r in self.db.execute(q + " ORDER BY key, attempt", args).fetchall()]

    def durations(self) -> Iterator[tuple[str, str, float]]:
        """``(measurement, target, seconds)`` of every ok result (for time estimates)."""
        yield from self.db.execute("SELECT measurement, target, duration FROM results WHERE status='ok'")

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    # -- builds --------------------------------------------------------------

    def get_build(self, key: str) -> tuple[str, str] | None:
        r = self.db.execute("SELECT ir_hash, ir_text FROM builds WHERE key=?", (key,)).fetchone()
        return (r[0], r[1]) if r else None

    def put_build(self, key: str, model: str, frontend: str, ir_hash: str, ir_text: str, seconds: float) -> None:
        self._begin()
        self.db.execute("INSERT OR REPLACE INTO builds VALUES (?,?,?,?,?,?,?)",
                        (key, model, frontend, ir_hash, ir_text, seconds, time.time()))
        self.db.execute("COMMIT")

    # -- tuning --------------------------------------------------------------

    def put_tuning(self, key: str, target: str, kernel: str, shape: Sequence[int], config: Mapping[str, Any],
                   seconds: float, default_seconds: float | None, ranked: int, measured: int) -> None:
        self._begin()
        self.db.execute("INSERT OR REPLACE INTO tuning VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (key, target, kernel, json.dumps(list(shape)), json.dumps(dict(config), sort_keys=True),
                         seconds, default_seconds, ranked, measured, time.time()))
        self.db.execute("COMMIT")

    def tuning(self, target: str | None = None) -> list[dict[str, Any]]:
        cols = ("key", "target", "kernel", "shape", "config", "seconds", "default_seconds", "ranked", "measured",
                "at")
        q = f"SELECT {','.join(cols)} FROM tuning"
        args: tuple[Any, ...] = ()
        if target:
            q += " WHERE target=?"
            args = (target,)
        out = []
        for r in self.db.execute(q + " ORDER BY key", args).fetchall():
            d = dict(zip(cols, r))
            d["shape"] = json.loads(d["shape"])
            d["config"] = json.loads(d["config"])
            out.append(d)
        return out

    # -- merge ---------------------------------------------------------------

    def merge_from(self, other: Store) -> dict[str, int]:
        """Copy every result, attempt, build and tuning choice of ``other`` into this store.

        For a key in both, an ``ok`` result wins over a failed one, then the newer one;
        attempts are appended (renumbered after this store's own)."""
        added = replaced = kept = 0
        self._begin()
        try:
            for r in other.rows():
                old = self.db.execute("SELECT status, finished FROM results WHERE key=?", (r.key,)).fetchone()
                better = old is None or (r.status == "ok" and old[0] != "ok") or \
                    (r.status == old[0] and r.finished > old[1])
                if better:
                    self.db.execute(
                        f"INSERT OR REPLACE INTO results VALUES ({','.join('?' * len(RESULT_COLUMNS))})",
                        _row_values(r))
                    if old is None:
                        added += 1
                    else:
                        replaced += 1
                else:
                    kept += 1
            mine = {(a["key"], a["status"], a["at"]) for a in self.attempts()}
            for a in other.attempts():
                if (a["key"], a["status"], a["at"]) in mine:
                    continue
                n = self.db.execute("SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE key=?",
                                    (a["key"],)).fetchone()[0]
                self.db.execute("INSERT INTO attempts VALUES (?,?,?,?,?,?,?)",
                                (a["key"], n + 1, a["status"], a["reason"], a["duration"], a["worker"], a["at"]))
            for b in other.db.execute("SELECT * FROM builds").fetchall():
                self.db.execute("INSERT OR IGNORE INTO builds VALUES (?,?,?,?,?,?,?)", b)
            for t in other.db.execute("SELECT * FROM tuning").fetchall():
                self.db.execute("INSERT OR IGNORE INTO tuning VALUES (?,?,?,?,?,?,?,?,?,?)", t)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return {"added": added, "replaced": replaced, "kept": kept}


__all__ = ["RESULT_COLUMNS", "SCHEMA_VERSION", "ResultRow", "Store"]
