"""Matrix-factorization mechanisms: A = L·R with noise L·z, one concept per module.

The noise of each mechanism here is a linear map of standard draws (Denisov, McMahan,
Rush, Smith, Thakurta, "Improved Differential Privacy for SGD via Optimal Private
Linear Operators on Adaptive Streams", NeurIPS 2022, https://arxiv.org/abs/2202.08312):

- :mod:`.sqrt_toeplitz` — the square root's Toeplitz coefficients, closed forms and
  causal convolution (no mechanism);
- :mod:`.sqrt` — the square-root factorization (Fichtenberger–Henzinger–Upadhyay);
- :mod:`.normalized_sqrt` and :mod:`.row_scaled_sqrt` — its column-normalized and
  row-scaled variants;
- :mod:`.blt`, :mod:`.normalized_blt` and :mod:`.row_scaled_blt` — buffered linear
  Toeplitz encoders, plain, column-normalized, and row-scaled too;
- :mod:`.toeplitz` — optimized Toeplitz coefficients;
- :mod:`.row_scaled_banded` — banded Toeplitz with row and column scaling, for
  (k, b) participation;
- :mod:`.scaled` — :class:`~.scaled.Scaled`, the base encoder with scaled rows and
  columns whose presets are the normalized-* and row-scaled-* mechanisms above;
- :mod:`.dense` — any explicit lower-triangular factorization;
- :mod:`.optimize` and :mod:`.optimize_max` — the dense mean- and max-loss optima.

Import the classes from :mod:`dpcount.counting`; the modules are loaded on first use.
"""
