"""The float model (F) of :mod:`dpcount.privacy.float_safe` at long horizons for
:class:`~dpcount.counting.factorization.horizon_free_growing.HorizonFreeGrowingBLT`
(block 0 of the default unbounded counter).

For each noise path

============  =========================================================================
``batch``     one scalar ``next_many(T)``
``blocks``    scalar ``next_many`` in blocks of 1, 7, 1000, 4097, 1, 7, … steps
``scalar``    T scalar ``next()`` calls
``vector``    T vector ``next()`` steps (dim 2, 3, 4 for seeds 1, 2, 3)
``vbatch``    one vector ``next_many(T)`` (the same dims)
``unbounded`` the default unbounded counter's block 0 (``UnboundedCounter(inner=
              "horizon-free-blt")``'s ``block_mechanism(0)``), scalar ``next()``
============  =========================================================================

and each T = 2^k asked for, the ratio

    max_{t ≤ T} (|N̂_t − N_t| + u·|N̂_t|) / (u·σ_t·(1 + Z*_T/σ₁))

of the float noise N̂ to the exact noise N of the mechanism's definition, from the very
draws the release used (recorded from the sampler), over every step and coordinate
(Z*_T: the largest |draw| of the first T steps). The mechanism has no horizon in its
definition (its columns do not depend on it): every path is run once, at the largest
T, on an instance of horizon 2^53 (``unbounded``: the counter's block 0, horizon
2^s − 1, s = ``HORIZON_FREE_BLT_SPAN_LOG2``, measured up to it), and each smaller T is
its prefix. σ_t is the exact std (``iter_variances``), σ₁ the sampler's.
(F) holds with κ = MODEL_KAPPA = 256; the target is ≤ κ/4 = 64 on every path.

The exact reference: the same recursion y = z − Σ_i u_i, N += ν_b·y, u ← θ⊙u + ω_b·y
in long double (x87 80-bit, u_LD = 2^-64 = u/2048) with the mechanism's float θ, ω_b,
ν_b — these floats ARE its definition (its certified column norms and exact variances
are computed from them; no decay is derived from a formula, so no rounded θ̂ differs
from an exact θ as in the BLT family). The paths of one seed run in lockstep, chunk
by chunk (:data:`CHUNK` steps), and every path's columns (coordinates) go through one
long-double loop: numpy's, or the same operations in C when a compiler is there
(``_KERNEL``, tested equal bit for bit). Summing the buffers in another order moves the
ratio by about 0.002 at 2^16: the reference's own error is far below the figures.

With the head factors (``HORIZON_FREE_GROWING_HEAD``: the columns of steps 1 … 18
changed; ``--log2 20,22,24,25 --beyond``, one seed at a time, ``nice -n 10``, CPU time
on a shared machine: 180–187 s per seed for batch, peak RSS 0.8 GB; vbatch with
``--by-coordinates``: 356 / 530 / 709 s for dim 2 / 3 / 4, peak RSS 1.8 / 2.4 / 2.9 GB):

============  ======  ======  ======  ======  ======
path          seed    2^20    2^22    2^24    2^25
============  ======  ======  ======  ======  ======
batch         1       2.416   2.296   2.321   2.392
batch         2       1.658   1.820   1.820   1.831
batch         3       2.126   2.304   2.304   2.304
unbounded     1–3     the same as batch, bit for bit (``--identical``)
vbatch        1       2.633   2.756   2.624   2.590
vbatch        2       3.413   3.189   3.189   3.189
vbatch        3       2.531   2.887   2.915   2.918
============  ======  ======  ======  ======  ======

``--identical --log2 16`` with them, seeds 1–3 (14–15 s CPU a seed): every path computes
batch's or vbatch's noise bit for bit, and vbatch's coordinates the scalar path's.
The table below is from before the head factors (the same columns from step 19 on).

Measured (``--log2 20,22,23,24 --beyond`` and ``--log2 24,25 --beyond``; CPU time per
seed on a shared, overloaded machine, the reference in C: 190–230 s for batch to 2^25
(peak RSS 0.8 GB), 545–567 s for vbatch to 2^24; vbatch to 2^25 with
``--by-coordinates``: 393 / 541 / 725 s for dim 2 / 3 / 4, peak RSS 1.8 / 2.4 / 2.9 GB; at
2^24 it gives the direct runs' 2.368 and 2.566 again; dim 3 at 2^24 and 2^25 from it):

============  ======  ======  ======  ======  ======  ======
path          seed    2^20    2^22    2^23    2^24    2^25
============  ======  ======  ======  ======  ======  ======
batch         1       2.628   2.497   2.497   2.377   2.377
batch         2       2.012   2.012   1.880   1.880   1.984
batch         3       2.229   2.229   2.229   2.229   2.229
unbounded     1–3     the same as batch, bit for bit (block 0 to step 2^25 − 1)
vbatch        1       2.027   2.104   2.280   2.368   2.744
vbatch        2       2.566   2.398   2.398   2.398   2.398
vbatch        3       2.566   2.566   2.566   2.566   2.811
============  ======  ======  ======  ======  ======  ======

``--identical --log2 16`` (seeds 1–3; rerun with block 0 to 2^25 − 1, 14–15 s CPU a
seed): blocks, scalar and unbounded compute batch's noise bit for bit, vector vbatch's,
and every vbatch coordinate is the scalar path's noise on that coordinate's draws — the
paths differ only in how steps are grouped into calls, so these figures hold for every
path. (2^20 … 2^22, seeds 1–3, every path measured directly: ≤ 3.1.)

Run: ``PYTHONPATH=src python benchmarks/float_model_growing.py [--log2 11,14,17,20]
[--paths batch,blocks,scalar,vector,vbatch,unbounded] [--seeds 1,2,3] [--beyond]
[--identical] [--by-coordinates]`` (``--beyond``: measure past the steps the process
refuses, ``FLOAT_MODEL_STEPS``, with the counter's block 0 spanning the largest T;
``--identical``: only the bit-for-bit comparison of the paths at the largest T;
``--by-coordinates``: vbatch only, its noise computed by the scalar path on each
coordinate of its own draws, bit for bit vbatch's, at about a third of the CPU time).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from typing import Any

import numpy as np

from dpcount.counting import unbounded as ub
from dpcount.counting.base import MAX_HORIZON
from dpcount.counting.factorization import horizon_free_growing as hfg
from dpcount.counting.factorization.horizon_free_growing import (
    GrowingColumns,
    HorizonFreeGrowingBLT,
)
from dpcount.counting.unbounded import HORIZON_FREE_BLT, UnboundedCounter
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

LD = np.longdouble
U = 2.0**-53
PATHS = ("batch", "blocks", "scalar", "vector", "vbatch", "unbounded")
#: vector dim per seed (seed 1 → 2, 2 → 3, 3 → 4; other seeds 3)
VECTOR_DIMS = {1: 2, 2: 3, 3: 4}
#: the block sizes of the ``blocks`` path, cycled
BLOCKS = (1, 7, 1000, 4097)
#: steps checked at a time (every path in lockstep, one long-double loop for all)
CHUNK = 1 << 14
BUDGET = Budget(epsilon=1.0, delta=1e-6)


def span() -> int:
    """The unbounded counter's block 0 horizon, 2^s − 1 (s read when called)."""
    return (1 << ub.HORIZON_FREE_BLT_SPAN_LOG2) - 1


class Recorder:
    """The sampler, recording every draw in draw order (:meth:`take` hands them out)."""

    integer = False

    def __init__(self, base: Any) -> None:
        self.base = base
        self.draws: list[np.ndarray] = []

    @property
    def variance(self) -> float:
        return float(self.base.variance)

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        out = self.base.sample(rng, size)
        self.draws.append(np.asarray(out).reshape(-1).copy())
        return out  # type: ignore[no-any-return]

    def take(self, count: int) -> np.ndarray:
        """The first ``count`` recorded draws not yet taken (scalar next() draws ahead)."""
        parts, have = [], 0
        while have < count:
            head = self.draws[0]
            part = head[: count - have]
            if len(part) == len(head):
                self.draws.pop(0)
            else:
                self.draws[0] = head[len(part) :]
            parts.append(part)
            have += len(part)
        return np.concatenate(parts) if parts else np.empty(0)


def mechanism(path: str = "batch") -> HorizonFreeGrowingBLT:
    """The growing BLT with the largest horizon (its columns do not depend on it;
    ``unbounded``: the very block 0 the default unbounded counter builds, horizon
    2^s − 1)."""
    if path == "unbounded":
        counter = UnboundedCounter(inner=HORIZON_FREE_BLT, budget=BUDGET)
        mech = counter.block_mechanism(0)
        assert isinstance(mech, HorizonFreeGrowingBLT) and mech.horizon == span()
        return mech
    return HorizonFreeGrowingBLT(MAX_HORIZON, budget=BUDGET)


def dim_of(path: str, seed: int) -> int | None:
    return VECTOR_DIMS.get(seed, 3) if path in ("vector", "vbatch") else None


class Driver:
    """One path's noise process, stepped chunk by chunk: :meth:`take` gives the next
    ``count`` steps' noise and their draws, both (count, D). ``batch`` and ``vbatch``
    release all T steps in one ``next_many(T)`` up front and hand them out."""

    def __init__(self, path: str, T: int, seed: int, mech: Any) -> None:
        self.path, self.mech = path, mech
        self.rec = Recorder(self.mech.sampler)
        self.dim = dim_of(path, seed)
        self.D = 1 if self.dim is None else self.dim
        source = NoiseSource.generator(self.rec, np.random.default_rng(seed), self.dim)
        self.process = self.mech.noise_process(source, self.dim)
        self.blocks = itertools.cycle(BLOCKS)
        self.spill: list[np.ndarray] = []  # computed by ``blocks`` beyond the chunk
        self.done = 0
        self.whole: np.ndarray | None = None
        if path in ("batch", "vbatch"):
            self.whole = np.asarray(self.process.next_many(T), dtype=np.float64).reshape(T, -1)

    def _noise(self, count: int) -> np.ndarray:
        p = self.process
        if self.whole is not None:
            return self.whole[self.done : self.done + count]
        if self.path != "blocks":
            return np.array([p.next() for _ in range(count)]).reshape(count, self.D)
        have = sum(len(x) for x in self.spill)
        while have < count:
            n = next(self.blocks)
            self.spill.append(np.asarray(p.next_many(n)).reshape(n, self.D))
            have += n
        flat = np.concatenate(self.spill)  # less than a chunk and a block
        self.spill = [flat[count:]]
        return flat[:count]

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        noise = self._noise(count)
        z = self.rec.take(count * self.D).reshape(count, self.D)
        self.done += count
        return noise, z


#: the reference's inner loop in C (x87 long double, the same operations in the same
#: order as the numpy loop of :meth:`ExactNoise.advance`: u summed row by row from u_0)
_KERNEL = r"""
void run(long steps, long n, long K, const long double *theta, const long double *w,
         const long double *nu, const long double *z, long double *u, long double *total,
         long double *out) {
    for (long t = 0; t < steps; t++) {
        for (long k = 0; k < K; k++) {
            long double s = u[k];
            for (long i = 1; i < n; i++) s += u[i * K + k];
            long double y = z[t * K + k] - s;
            total[k] += *nu * y;
            for (long i = 0; i < n; i++) {
                u[i * K + k] *= theta[i];
                u[i * K + k] += w[i] * y;
            }
            out[t * K + k] = total[k];
        }
    }
}
"""


def _kernel() -> Any:
    """The compiled :data:`_KERNEL` (cached in the temp folder), or None (no C compiler:
    the numpy loop runs)."""
    import ctypes
    import hashlib
    import subprocess
    import tempfile
    from pathlib import Path

    if np.finfo(LD).nmant != 63:  # not x87 extended: the kernel would not match numpy
        return None
    folder = Path(tempfile.gettempdir()) / "dpcount_fm_growing"
    lib = folder / f"k{hashlib.sha256(_KERNEL.encode()).hexdigest()[:16]}.so"
    if not lib.exists():
        folder.mkdir(exist_ok=True)
        src = lib.with_suffix(".c")
        src.write_text(_KERNEL)
        tmp = lib.with_suffix(f".{id(src)}.tmp")
        try:
            subprocess.run(
                ["cc", "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)],
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError):
            return None
        tmp.replace(lib)
    fn = ctypes.CDLL(str(lib)).run
    fn.restype = None
    return fn


class ExactNoise:
    """N (the exact noise) for K streams at once: the recursion of the module docstring
    in long double with the mechanism's θ, ω_b, ν_b, fed chunk by chunk (its inner loop
    in C when a compiler is there, ``fast``; the same operations as the numpy loop)."""

    def __init__(self, columns: GrowingColumns, K: int, fast: bool = True) -> None:
        self.columns = columns
        self.theta = np.asarray(columns.decay).astype(LD)[:, None]
        self.u = np.zeros((len(columns.decay), K), dtype=LD)
        self.total = np.zeros(K, dtype=LD)
        self.t = 0  # steps done
        self.kernel = _kernel() if fast else None

    def _run(self, w: np.ndarray, nu: Any, zl: np.ndarray, out: np.ndarray) -> None:
        """len(zl) steps of one block (its ω_b as w (n, 1), ν_b), N into out."""
        u, total, theta = self.u, self.total, self.theta
        if self.kernel is not None:
            import ctypes

            def ptr(a: np.ndarray) -> Any:
                assert a.dtype == LD and a.flags.c_contiguous
                return a.ctypes.data_as(ctypes.c_void_p)

            zc, oc = np.ascontiguousarray(zl), np.empty(zl.shape, dtype=LD)
            nu_a, wc = np.array([nu], dtype=LD), np.ascontiguousarray(w.ravel())
            th = np.ascontiguousarray(theta.ravel())
            n, K = u.shape
            args = (ptr(th), ptr(wc), ptr(nu_a), ptr(zc), ptr(u), ptr(total), ptr(oc))
            self.kernel(ctypes.c_long(len(zl)), ctypes.c_long(n), ctypes.c_long(K), *args)
            out[...] = oc
            return
        for t in range(len(zl)):
            y = zl[t] - u.sum(axis=0)
            total += nu * y
            u *= theta
            u += w * y
            out[t] = total

    def advance(self, z: np.ndarray) -> np.ndarray:
        """N (L, K) for the next L steps' draws z (L, K)."""
        cols = self.columns
        zl = z.astype(LD)
        out = np.empty(zl.shape, dtype=LD)
        k = 0
        while k < len(zl):
            b = cols.block_of(self.t + 1)
            stop = cols.starts[b + 1] - 1 if b + 1 < len(cols.starts) else MAX_HORIZON
            steps = min(len(zl) - k, stop - self.t)  # to the block's last step
            w = np.asarray(cols.scales[b]).astype(LD)[:, None]
            nu = LD(float(cols.normalizers[b]))
            self._run(w, nu, zl[k : k + steps], out[k : k + steps])
            k += steps
            self.t += steps
        return out


def exact_noise(columns: GrowingColumns, z: np.ndarray) -> np.ndarray:
    """N (T, K) for the draws z (T, K), every column a stream (:class:`ExactNoise`)."""
    return ExactNoise(columns, z.shape[1]).advance(z)


def drive(mech: Any, path: str, T: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N̂ (T, D), the draws of the first T steps (T, D)) of one path on ``mech``."""
    driver = Driver(path, T, seed, mech)
    return driver.take(T)


class Check:
    """The running (F) ratio of one path: the largest per-step error (over its
    coordinates) in units of u·σ_t, and the largest |draw|/σ₁ so far."""

    def __init__(self, Ts: list[int], sigma1: float) -> None:
        self.Ts, self.sigma1 = Ts, sigma1
        self.err = self.zmax = 0.0
        self.t = 0
        self.out: list[float] = []

    def add(self, noise: np.ndarray, exact: np.ndarray, z: np.ndarray, sd: np.ndarray) -> None:
        """The next len(noise) steps: N̂, N (long double) and the draws (L, D), σ_t (L,)."""
        e = (np.abs(noise.astype(LD) - exact) + LD(U) * np.abs(noise).astype(LD)).astype(np.float64)
        err = np.maximum.accumulate(np.maximum(np.max(e, axis=1) / (U * sd), self.err))
        zmax = np.maximum.accumulate(np.maximum(np.max(np.abs(z), axis=1) / self.sigma1, self.zmax))
        for T in self.Ts:
            if self.t < T <= self.t + len(noise):
                self.out.append(float(err[T - self.t - 1] / (1.0 + zmax[T - self.t - 1])))
        self.err, self.zmax = float(err[-1]), float(zmax[-1])
        self.t += len(noise)


def ratios(
    mech: Any, noise: np.ndarray, exact: np.ndarray, z: np.ndarray, Ts: list[int]
) -> list[float]:
    """The (F) ratio over the first T steps, for each T in Ts (prefixes of one run)."""
    T = len(noise)
    v = np.fromiter(itertools.islice(mech.iter_variances(), T), np.float64, count=T)
    check = Check(Ts, math.sqrt(mech.sampler.variance))
    check.add(noise, exact, z, np.sqrt(v))
    return check.out


def measure_paths(
    paths: list[str], Ts: list[int], seed: int, report: Any = None
) -> dict[str, list[float]]:
    """The (F) ratio of every path in ``paths`` with ``seed`` at each T in Ts: one run
    of each at max(Ts) (``unbounded`` up to its span), stepped in lockstep by
    :data:`CHUNK` steps, every path's coordinates through one long-double loop (a path
    past its horizon is fed zero draws there, its output unused)."""
    T = max(Ts)
    mechs = [mechanism(p) for p in paths]
    drivers = [Driver(p, min(T, m.horizon), seed, m) for p, m in zip(paths, mechs, strict=True)]
    sigma1 = math.sqrt(mechs[0].sampler.variance)
    checks = [Check([min(x, m.horizon) for x in Ts], sigma1) for m in mechs]
    widths = [d.D for d in drivers]
    edges = np.cumsum([0, *widths])
    exact = ExactNoise(mechs[0].columns, int(edges[-1]))
    variances = mechs[0].iter_variances()  # the same columns (and values) for every path
    done = 0
    while done < T:
        L = min(CHUNK, T - done)
        sd = np.sqrt(np.fromiter(itertools.islice(variances, L), np.float64, count=L))
        takes = [d.take(max(0, min(L, d.mech.horizon - done))) for d in drivers]
        z = np.zeros((L, int(edges[-1])))
        for (_, zz), a, b in zip(takes, edges[:-1], edges[1:], strict=True):
            z[: len(zz), a:b] = zz
        ex = exact.advance(z)
        for check, (noise, zz), a, b in zip(checks, takes, edges[:-1], edges[1:], strict=True):
            if len(noise):
                check.add(noise, ex[: len(noise), a:b], zz, sd[: len(noise)])
        done += L
        if report is not None and done in Ts:  # every path's ratio at T = done so far
            report(done, {p: c.out[-1] for p, c in zip(paths, checks, strict=True)})
    return {p: c.out for p, c in zip(paths, checks, strict=True)}


def measure(path: str, Ts: list[int], seed: int) -> list[float]:
    """The (F) ratio of ``path`` with ``seed`` at each T in Ts (one run at max(Ts))."""
    return measure_paths([path], Ts, seed)[path]


def identical(paths: list[str], T: int, seed: int) -> dict[str, bool]:
    """Whether each path's noise for the first T steps equals, bit for bit, that of the
    path computed by the same code in one call (``batch`` for the scalar paths, ``vbatch``
    for ``vector``), from the same seed: the paths differ only in how the steps are
    grouped into calls, so this shows the (F) ratio of one holds for the other."""
    out = {}
    for path in paths:
        ref = "vbatch" if dim_of(path, seed) is not None else "batch"
        ref_mech, mech = mechanism(ref), mechanism(path)
        n = min(T, mech.horizon)
        a, _ = Driver(ref, n, seed, ref_mech).take(n)
        b, _ = Driver(path, n, seed, mech).take(n)
        out[path] = bool(np.array_equal(a, b))
    return out


class Replay(Recorder):
    """A sampler that hands out given draws in order (its variance the mechanism's)."""

    def __init__(self, base: Any, draws: np.ndarray) -> None:
        super().__init__(base)
        self.values, self.at = draws, 0

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        n = math.prod(size) if isinstance(size, tuple) else int(size)
        out = self.values[self.at : self.at + n]
        self.at += n
        return out.reshape(size)


def coordinates_as_scalar(T: int, seed: int) -> bool:
    """Whether every coordinate of the ``vbatch`` path's noise (T steps) equals, bit for
    bit, the scalar ``batch`` path's noise computed from that coordinate's draws: the
    vector step does the scalar step's float operations coordinate by coordinate."""
    mech = mechanism("vbatch")
    noise, z = Driver("vbatch", T, seed, mech).take(T)
    for j in range(z.shape[1]):
        scalar = mechanism("batch")
        replay = Replay(scalar.sampler, z[:, j].copy())
        source = NoiseSource.generator(replay, np.random.default_rng(0))
        if not np.array_equal(scalar.noise_process(source).next_many(T), noise[:, j]):
            return False
    return True


def vector_draws(T: int, seed: int) -> np.ndarray:
    """The draws (T, d) of the ``vbatch`` path's ``next_many(T)`` with ``seed`` (the same
    sampler calls in the same order; its vector recursion skipped, zeros computed)."""
    mech = mechanism("vbatch")
    dim = dim_of("vbatch", seed)
    rec = Recorder(mech.sampler)
    process = mech.noise_process(NoiseSource.generator(rec, np.random.default_rng(seed), dim), dim)

    def draw_only(dest: np.ndarray) -> None:
        process.noise.sample((len(dest), dim))
        dest[...] = 0.0

    process._compute_vector = draw_only
    process.next_many(T)
    return rec.take(T * int(dim or 1)).reshape(T, -1)


def measure_vector_by_coordinates(Ts: list[int], seed: int, check: int = 1 << 14) -> list[float]:
    """The (F) ratio of the ``vbatch`` path with ``seed`` at each T in Ts, its noise
    computed coordinate by coordinate by the scalar path from the vbatch draws
    (:func:`vector_draws`): the vector step does the scalar step's float operations
    coordinate by coordinate, so this is vbatch's noise bit for bit
    (:func:`coordinates_as_scalar`, checked here on a ``check``-step run first) at the
    cost of d scalar runs (the vector step's numpy calls cost ~10× a scalar step)."""
    assert coordinates_as_scalar(check, seed), "vbatch coordinates != scalar path"
    T = max(Ts)
    z = vector_draws(T, seed)
    noise = np.empty_like(z)
    for j in range(z.shape[1]):
        scalar = mechanism("batch")
        replay = Replay(scalar.sampler, z[:, j].copy())
        source = NoiseSource.generator(replay, np.random.default_rng(0))
        noise[:, j] = scalar.noise_process(source).next_many(T)
    mech = mechanism("vbatch")
    exact = ExactNoise(mech.columns, z.shape[1])
    variances = mech.iter_variances()
    check = Check(Ts, math.sqrt(mech.sampler.variance))
    for a in range(0, T, CHUNK):
        b = min(T, a + CHUNK)
        sd = np.sqrt(np.fromiter(itertools.islice(variances, b - a), np.float64, count=b - a))
        check.add(noise[a:b], exact.advance(z[a:b]), z[a:b], sd)
    return check.out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", default="11,14,17,20", help="log2 of the step counts")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument(
        "--beyond",
        action="store_true",
        help="measure past the refusal (FLOAT_MODEL_STEPS; the counter's block 0 then spans "
        "the largest T)",
    )
    ap.add_argument(
        "--by-coordinates",
        action="store_true",
        help="vbatch only: its noise computed coordinate by coordinate by the scalar path "
        "from its own draws (bit for bit vbatch's, checked on 2^14 steps first; ~3x faster)",
    )
    ap.add_argument(
        "--identical",
        action="store_true",
        help="only check that each path's noise equals batch's / vbatch's bit for bit, at "
        "the largest T",
    )
    args = ap.parse_args()
    Ts = [1 << int(k) for k in args.log2.split(",")]
    if args.identical:
        for seed in (int(s) for s in args.seeds.split(",")):
            start = time.process_time()
            same = identical(args.paths.split(","), max(Ts), seed)
            same["vbatch coordinates = scalar"] = coordinates_as_scalar(max(Ts), seed)
            print(f"seed {seed}, T = 2^{max(Ts).bit_length() - 1}: bit for bit equal to "
                  f"batch / vbatch: {same} ({time.process_time() - start:.0f} s CPU)")  # fmt: skip
        return
    if args.beyond:
        hfg.FLOAT_MODEL_STEPS = MAX_HORIZON
        ub.HORIZON_FREE_BLT_SPAN_LOG2 = max(ub.HORIZON_FREE_BLT_SPAN_LOG2, max(Ts).bit_length() - 1)
    print(
        f"(F) ratio of horizon-free-growing-blt, units u·σ_t·(1 + Z*/σ₁); κ = {MODEL_KAPPA}, "
        f"target ≤ κ/4 = {MODEL_KAPPA // 4}; unbounded: block 0 to step {span()}"
    )
    print(
        f"{'path':10} {'seed':>4} " + " ".join(f"{'T=2^' + str(T.bit_length() - 1):>9}" for T in Ts)
    )
    paths = args.paths.split(",")
    if args.by_coordinates:
        for seed in (int(s) for s in args.seeds.split(",")):
            start = time.process_time()
            result = measure_vector_by_coordinates(Ts, seed)
            print(f"{'vbatch':10} {seed:>4} " + " ".join(f"{r:9.3f}" for r in result)
                  + f"   (by coordinates, dim {dim_of('vbatch', seed)}; "
                  f"{time.process_time() - start:.0f} s CPU)", flush=True)  # fmt: skip
        return
    for seed in (int(s) for s in args.seeds.split(",")):
        start = time.process_time()

        def report(T: int, now: dict[str, float], seed: int = seed, start: float = start) -> None:
            cpu = time.process_time() - start
            print(f"  seed {seed} at T=2^{T.bit_length() - 1} ({cpu:.0f} s CPU): {now}", flush=True)

        result = measure_paths(paths, Ts, seed, report)
        for path in paths:
            print(f"{path:10} {seed:>4} " + " ".join(f"{r:9.3f}" for r in result[path]))
        print(f"(seed {seed}: {time.process_time() - start:.0f} s CPU)", flush=True)


if __name__ == "__main__":
    main()
