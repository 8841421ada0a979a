"""Privacy calibration and noise sampling.

Calibration (:mod:`.calibration`) turns sensitivities and a budget into a noise
scale; samplers (:mod:`.noise`) draw the noise; :func:`calibrate` does both and
records the :class:`PrivacyGuarantee`. Exact integer samplers live in
:mod:`.discrete`; optional PLD accounting (``dpcount[accounting]``) in
:mod:`.accounting`, imported only when used.
"""

from dpcount.privacy.budget import (
    Budget,
    CalibrationRule,
    MissingDeltaError,
    Neighbouring,
    NoiseKind,
    Participation,
    ParticipationUnsupportedError,
)
from dpcount.privacy.calibration import (
    analytic_gaussian_delta,
    discrete_gaussian_sigma,
    discrete_laplace_scale,
    fhu_constant,
    fhu_delta,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
    paper_gaussian_sigma,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)
from dpcount.privacy.discrete import DiscreteGaussianNoise, DiscreteLaplaceNoise
from dpcount.privacy.guarantee import (
    DISCRETE_NOISE_KINDS,
    NOISE_KINDS,
    Calibrated,
    PrivacyGuarantee,
    calibrate,
)
from dpcount.privacy.noise import (
    ConstantNoise,
    GaussianNoise,
    LaplaceNoise,
    NoiseBuffer,
    NoiseSampler,
    ZeroNoise,
)
from dpcount.privacy.notes import PrivacyWarning, data_derived_warning, delta_warning
from dpcount.privacy.rng import RNGLike, as_generator, is_secure, secure_generator
from dpcount.privacy.tails import (
    gaussian_linf_bound,
    gaussian_two_sided_quantile,
    laplace_linf_bound,
)

__all__ = [
    "DISCRETE_NOISE_KINDS",
    "NOISE_KINDS",
    "Budget",
    "Calibrated",
    "CalibrationRule",
    "ConstantNoise",
    "DiscreteGaussianNoise",
    "DiscreteLaplaceNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "MissingDeltaError",
    "Neighbouring",
    "NoiseBuffer",
    "NoiseKind",
    "NoiseSampler",
    "Participation",
    "ParticipationUnsupportedError",
    "PrivacyGuarantee",
    "PrivacyWarning",
    "RNGLike",
    "ZeroNoise",
    "analytic_gaussian_delta",
    "as_generator",
    "calibrate",
    "data_derived_warning",
    "delta_warning",
    "discrete_gaussian_sigma",
    "discrete_laplace_scale",
    "fhu_constant",
    "fhu_delta",
    "gaussian_linf_bound",
    "gaussian_sigma",
    "gaussian_two_sided_quantile",
    "is_secure",
    "laplace_epsilon",
    "laplace_linf_bound",
    "laplace_scale",
    "laplace_scale_approximate",
    "paper_gaussian_sigma",
    "secure_generator",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]
