"""The scaled factorizations as presets of one Scaled strategy.

Every registered preset is found by its scaling (``Scaled.of``) and by its registry
name, and the structure they share (the dense factorization, the kept exact variances)
is checked exactly, with zero noise, against an independent dense computation: the
encoder diag(w)·C·diag(1/n) from scipy's Toeplitz matrix, B′·C′ = A, the column norms
against the certified sensitivity, the row norms of B′ against the variances.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import toeplitz

from dpcount.counting.factorization.scaled import (
    PRESETS,
    Base,
    Columns,
    Rows,
    Scaled,
    Scaling,
)
from dpcount.counting.registry import REGISTRY, build_mechanism
from dpcount.privacy import Budget

T = 33
BUDGET = Budget(epsilon=1.0, delta=1e-6)


@pytest.fixture(scope="module", params=sorted(PRESETS))
def preset(request: pytest.FixtureRequest) -> Scaled:
    name = request.param
    if name == "row-scaled-banded":  # not shipped at T: cheap coefficients, not optimized
        cls = Scaled.of(Base.BANDED_TOEPLITZ, rows=Rows.CHEBYSHEV)
        coefficients = {"coefficients": [1.0, 0.5, 0.25], "log_weights": [0.1, -0.2]}
        return cls(T, **coefficients, budget=BUDGET, rng=0)  # type: ignore[call-arg]
    mechanism = build_mechanism(name, horizon=T, budget=BUDGET, rng=0)
    assert isinstance(mechanism, Scaled)
    return mechanism


def test_every_preset_is_found_by_its_scaling_and_its_name() -> None:
    by_name = {e.name: e for e in REGISTRY}
    for name, scaling in PRESETS.items():
        cls = Scaled.of(scaling.base, rows=scaling.rows, columns=scaling.columns)
        assert cls.scaling == scaling
        assert cls.name == name
        assert by_name[name].cls is cls
    # and every registered Scaled class is a preset
    scaled = {e.name for e in REGISTRY if e.name and issubclass(e.cls, Scaled)}
    assert scaled == set(PRESETS)


def test_of_takes_the_enum_values_and_refuses_a_scaling_that_is_no_preset() -> None:
    assert Scaled.of(Base("blt"), rows=Rows("chebyshev")).name == "row-scaled-blt"
    assert Scaled.of(Base.SQRT, columns=Columns.NORMALIZE).name == "normalized-sqrt"
    with pytest.raises(ValueError, match=r"no preset scales .*the presets are normalized-sqrt"):
        Scaled.of(Base.BANDED_TOEPLITZ)
    assert Scaled.of("sqrt", rows="chebyshev", columns="normalize").name == "row-scaled-sqrt"
    with pytest.raises(ValueError, match=r"base must be one of \('sqrt', 'blt'.*got 'toeplitz'"):
        Scaled.of("toeplitz")
    assert Scaling(Base.BLT) == Scaling(Base.BLT, Rows.NONE, Columns.NORMALIZE)


def test_the_dense_factorization_is_the_scaled_encoder(preset: Scaled) -> None:
    B, C = preset.dense_factorization()
    w, n = preset.row_weights(), preset.weights()
    c = preset._encoder_coefficients()
    expected = np.diag(w) @ toeplitz(c, np.zeros(T)) @ np.diag(1.0 / n)
    np.testing.assert_allclose(C, expected, rtol=1e-13, atol=0)
    np.testing.assert_allclose(B @ C, np.tril(np.ones((T, T))), rtol=0, atol=1e-12)
    if preset.scaling.rows is Rows.NONE:
        np.testing.assert_array_equal(w, np.ones(T))
    else:
        assert np.ptp(w) > 0.01  # the presets' row weights are not flat


def test_the_columns_are_normalized_to_the_certified_sensitivity(preset: Scaled) -> None:
    _, C = preset.dense_factorization()
    norms = np.linalg.norm(C, axis=0)
    _, l2 = preset._unit_sensitivities()
    assert np.all(norms <= l2)
    # equal norms (the banded preset's column_scales aside: its shipped entries are at 2048)
    np.testing.assert_allclose(norms, norms[0], rtol=1e-12)
    assert l2 <= norms.max() * (1 + 1e-8)


def test_the_kept_variances_are_the_row_norms_of_the_decoder(preset: Scaled) -> None:
    B, _ = preset.dense_factorization()
    kept = preset.noise_coefficients()
    np.testing.assert_allclose(kept, np.sum(B * B, axis=1), rtol=1e-12)
    kept[0] = -1.0  # a copy: the kept values are not changed
    again = preset.noise_coefficients()
    assert again[0] > 0
    variances = preset.variances()
    assert [preset.variance_at(t) for t in (1, T // 2, T)] == [
        variances[0],
        variances[T // 2 - 1],
        variances[-1],
    ]
    assert list(preset.iter_variances(5)) == variances[4:].tolist()


def test_the_dense_factorization_refuses_long_horizons() -> None:
    mechanism = build_mechanism("normalized-blt", horizon=4097, budget=BUDGET, rng=0)
    with pytest.raises(ValueError, match="dense factorization is for horizon <= 4096, got 4097"):
        mechanism.dense_factorization()
