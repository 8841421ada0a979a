"""Durable files without differential privacy in them: the checkpoint codec
(:mod:`dpcount.durable.format`), the exact check of a saved bit generator state
(:mod:`dpcount.durable.generators`) and atomic writes (:mod:`dpcount.durable.atomic`).

The restore policy (which mechanism, the calibration check, the rebuild) lives in
:mod:`dpcount.counting.checkpoint`, which imports these; nothing here imports
:mod:`dpcount.counting`. This package imports nothing on its own, so that loading
the codec never loads a mechanism.
"""
