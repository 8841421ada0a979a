"""Correlated-noise privatizers for training loops (DP-FTRL, DP matrix factorization).

:func:`gaussian_privatizer` calibrates any streaming counting mechanism of
:mod:`dpcount.counting` (BLT, normalized square root, trees, independent noise, …)
to an epochs × batches participation schema and a clip norm;
:meth:`GradientPrivatizer.init` / :meth:`GradientPrivatizer.privatize` run it over
arrays or nested dicts/lists/tuples of arrays in numpy, optax style. The optax
adapter :func:`optax_privatizer` imports jax and optax only when called
(``pip install 'dpcount[training]'``).
"""

from dpcount.training.balls_in_bins import (
    BallsInBinsAccountant,
    BallsInBinsBatches,
    MonteCarlo,
    MonteCarloCertificate,
    balls_in_bins_batches,
)
from dpcount.training.optax_adapter import (
    OptaxDeviceNoiseState,
    OptaxNoiseState,
    optax_privatizer,
)
from dpcount.training.privatizer import (
    GradientPrivatizer,
    NoiseState,
    clip_and_sum,
    gaussian_privatizer,
)
from dpcount.training.renyi_allocation import (
    AllocationAccounting,
    RenyiAllocationAccountant,
    RenyiCertificate,
)
from dpcount.training.sampling import (
    CyclicPoissonBatches,
    Sampling,
    amplified_noise_multiplier,
    cyclic_poisson_batches,
    fixed_batches,
)

__all__ = [
    "AllocationAccounting",
    "BallsInBinsAccountant",
    "BallsInBinsBatches",
    "CyclicPoissonBatches",
    "GradientPrivatizer",
    "MonteCarlo",
    "MonteCarloCertificate",
    "NoiseState",
    "OptaxDeviceNoiseState",
    "OptaxNoiseState",
    "RenyiAllocationAccountant",
    "RenyiCertificate",
    "Sampling",
    "amplified_noise_multiplier",
    "balls_in_bins_batches",
    "clip_and_sum",
    "cyclic_poisson_batches",
    "fixed_batches",
    "gaussian_privatizer",
    "optax_privatizer",
]
