"""Privacy calibration and noise sampling.

Calibration (:mod:`.calibration`) turns sensitivities and a budget into a noise
scale; samplers (:mod:`.noise`) draw the noise; :func:`calibrate` does both and
records the :class:`PrivacyGuarantee`.
"""

from dpcount.privacy.calibration import (
    analytic_gaussian_delta,
    fhu_constant,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
)
from dpcount.privacy.guarantee import Calibrated, PrivacyGuarantee, calibrate
from dpcount.privacy.noise import (
    ConstantNoise,
    GaussianNoise,
    LaplaceNoise,
    NoiseBuffer,
    NoiseSampler,
    ZeroNoise,
)
from dpcount.privacy.rng import RNGLike, as_generator

__all__ = [
    "Calibrated",
    "ConstantNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "NoiseBuffer",
    "NoiseSampler",
    "PrivacyGuarantee",
    "RNGLike",
    "ZeroNoise",
    "analytic_gaussian_delta",
    "as_generator",
    "calibrate",
    "fhu_constant",
    "gaussian_sigma",
    "laplace_epsilon",
    "laplace_scale",
    "laplace_scale_approximate",
]
