"""Bit-identity of the scaled presets across a refactor (issue 33, item 7).

Run once on the old code and once on the new, then compare:

    PYTHONPATH=src python benchmarks/scaled_identity.py dump before.json --checkpoints DIR
    PYTHONPATH=src python benchmarks/scaled_identity.py dump after.json
    PYTHONPATH=src python benchmarks/scaled_identity.py compare before.json after.json
    PYTHONPATH=src python benchmarks/scaled_identity.py resume DIR   # on the new code

For each preset (normalized-sqrt, row-scaled-sqrt, normalized-blt, row-scaled-blt,
row-scaled-banded) × horizon × noise request (Gaussian under each calibration rule,
with and without a (k, b)-participation schema, and the refused kinds), the dump holds
the SHA-256 of the bytes of: the seeded batch release, a seeded scalar and vector
stream, the exact variances, mse, max_variance, the unit sensitivities, the privacy
guarantee's repr, ``config()``, ``describe()``, the dense factorization (small T), the
loss functions, the certificates' best known losses, or the refusal's message.
``--checkpoints`` also saves format-2 checkpoints mid-stream (and their continuation's
digest), which ``resume`` loads on the new code and continues.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpcount.counting import checkpoint
from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget, Participation

#: (name, horizons, build options)
PRESETS: tuple[tuple[str, tuple[int, ...], dict[str, Any]], ...] = (
    ("normalized-sqrt", (1, 2, 7, 100, 1024, 20000), {}),
    ("row-scaled-sqrt", (1, 2, 7, 100, 1024, 4096), {}),
    ("normalized-blt", (1, 2, 7, 100, 1024, 70000, 1 << 18), {}),
    ("normalized-blt", (1000, 40000), {"objective": "max"}),
    ("row-scaled-blt", (1, 2, 7, 100, 1024, 70000, 1 << 18), {}),
    ("row-scaled-blt", (1000, 40000), {"objective": "max"}),
    ("row-scaled-banded", (1, 7, 100, 1024, 2048), {}),
    ("row-scaled-banded", (64, 2048), {"bands": 16}),
)
#: the noise requests: (label, budget keywords)
REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("analytic", {"epsilon": 1.0, "delta": 1e-6}),
    ("classic", {"epsilon": 0.5, "delta": 1e-5, "calibration": "classic"}),
    ("fhu", {"epsilon": 0.5, "delta": 1e-5, "calibration": "fhu"}),
    ("step2", {"epsilon": 2.0, "delta": 1e-6, "step_sensitivity": 2.0}),
    ("schema", {"epsilon": 1.0, "delta": 1e-6, "participation": (3, 16)}),
    ("laplace", {"epsilon": 1.0, "noise": "laplace"}),
    ("dgauss", {"epsilon": 1.0, "delta": 1e-6, "noise": "discrete-gaussian"}),
    ("nodelta", {"epsilon": 1.0}),
)


def _digest(value: Any) -> str:
    h = hashlib.sha256()
    if isinstance(value, np.ndarray):
        h.update(str(value.dtype).encode() + str(value.shape).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    else:
        h.update(repr(value).encode())
    return h.hexdigest()[:24]


def _budget(kw: dict[str, Any]) -> Budget:
    kw = dict(kw)
    if "participation" in kw:
        k, b = kw.pop("participation")
        kw["participation"] = Participation(k, b)
    return Budget(**kw)


def _build(name: str, T: int, opts: dict[str, Any], kw: dict[str, Any], seed: int) -> Any:
    return build_mechanism(name, horizon=T, budget=_budget(kw), rng=seed, **opts)


def _try(f: Callable[[], Any]) -> Any:
    try:
        return f()
    except Exception as err:
        return f"{type(err).__name__}: {err}"


def _case(name: str, T: int, opts: dict[str, Any], kw: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        m = _build(name, T, opts, kw, 1)
    except Exception as err:
        return {"refused": _digest(f"{type(err).__name__}: {err}"), "msg": str(err)[:200]}
    x = np.arange(T) % 3
    out["release"] = _digest(m.release(x))
    out["variances"] = _digest(m.variances())
    out["mse"] = _digest(m.mse())
    out["max_variance"] = _digest(m.max_variance())
    out["unit"] = _digest(m._unit_sensitivities())
    out["privacy"] = _digest(repr(m.privacy))
    out["config"] = _digest(json.dumps(m.config(), sort_keys=True, default=str))
    out["describe"] = _digest(m.describe())
    out["repr"] = _digest(repr(m))
    out["profile"] = _digest(_try(m.sensitivity_profile))
    out["noise_coefficients"] = _digest(_try(m.noise_coefficients))
    if hasattr(m, "losses"):
        out["losses"] = _digest(_try(m.losses))
    if T <= 512:
        decoder, encoder = m.dense_factorization()
        out["dense_decoder"], out["dense_encoder"] = _digest(decoder), _digest(encoder)
    m2 = _build(name, T, opts, kw, 2)
    s = m2.stream()
    steps = min(T, 40)
    out["stream"] = _digest(np.array([s.update(int(v)) for v in x[:steps]]))
    m3 = _build(name, T, opts, kw, 3)
    vs = m3.stream()
    vec = _try(lambda: np.array([vs.update(np.full(5, float(i % 2))) for i in range(min(T, 12))]))
    out["vector_stream"] = _digest(vec)
    return out


def dump(path: Path, checkpoints: Path | None) -> None:
    result: dict[str, Any] = {}
    for name, horizons, opts in PRESETS:
        for T in horizons:
            for label, kw in REQUESTS:
                key = f"{name}{opts or ''}/T={T}/{label}"
                result[key] = _case(name, T, opts, kw)
                print(key, file=sys.stderr)
    result["certificates"] = _certificates()
    if checkpoints is not None:
        result["checkpoints"] = _save_checkpoints(checkpoints)
    path.write_text(json.dumps(result, indent=1, sort_keys=True))


def _certificates() -> dict[str, str]:
    from dpcount.analysis import certificates

    out = {}
    for T in (1024, 4096, 16384, 1 << 20):
        for objective in ("mean", "max"):
            ref = certificates.best_known_loss(T, objective)
            out[f"{T}/{objective}"] = _digest(repr(ref))
    return out


def _checkpoint_cases() -> list[tuple[str, int, dict[str, Any], int | None]]:
    return [
        ("normalized-sqrt", 300, {}, None),
        ("normalized-sqrt", 20000, {}, None),
        ("row-scaled-sqrt", 300, {}, 3),
        ("normalized-blt", 5000, {}, None),
        ("normalized-blt", 300, {}, 4),
        ("row-scaled-blt", 5000, {}, None),
        ("row-scaled-blt", 300, {}, 4),
        ("row-scaled-banded", 256, {"bands": 16}, None),
    ]


def _step(dim: int | None, i: int) -> Any:
    return i % 2 if dim is None else np.full(dim, float(i % 2))


def _save_checkpoints(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for i, (name, T, opts, dim) in enumerate(_checkpoint_cases()):
        m = _build(name, T, opts, {"epsilon": 1.0, "delta": 1e-6}, 10 + i)
        s = m.stream()
        for t in range(17):
            s.update(_step(dim, t))
        checkpoint.save_stream(s, folder / f"{i}.ckpt")
        rest = np.array([s.update(_step(dim, t)) for t in range(17, 60)])
        out[str(i)] = _digest(rest)
    return out


def resume(folder: Path, before: Path) -> int:
    expected = json.loads(before.read_text())["checkpoints"]
    bad = 0
    for i, (_name, _T, _opts, dim) in enumerate(_checkpoint_cases()):
        s = checkpoint.load_stream(folder / f"{i}.ckpt")
        rest = np.array([s.update(_step(dim, t)) for t in range(17, 60)])
        ok = _digest(rest) == expected[str(i)]
        bad += not ok
        print(f"checkpoint {i} ({type(s.mechanism).__name__}): {'same' if ok else 'DIFFERENT'}")
    return bad


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    a.pop("checkpoints", None)
    cases = fields = bad = 0
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            bad += 1
            old, new = a.get(key, {}), b.get(key, {})
            which = sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))
            print(f"DIFFERENT {key}: {', '.join(which)}")
        cases += 1
        fields += len(a.get(key, {}))
    print(f"{cases} cases, {fields} digests compared, {bad} cases differ")
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path", type=Path)
    d.add_argument("--checkpoints", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    r = sub.add_parser("resume")
    r.add_argument("folder", type=Path)
    r.add_argument("before", type=Path)
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.path, args.checkpoints)
        return 0
    if args.command == "compare":
        return int(compare(args.before, args.after) > 0)
    return int(resume(args.folder, args.before) > 0)


if __name__ == "__main__":
    raise SystemExit(main())
