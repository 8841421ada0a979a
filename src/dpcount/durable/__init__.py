"""Durable files without differential privacy in them: the checkpoint codec
(:mod:`dpcount.durable.format`), the exact check of a saved bit generator state
(:mod:`dpcount.durable.generators`), atomic writes (:mod:`dpcount.durable.atomic`),
the one process lock (:mod:`dpcount.durable.lock`) and the one exactly-once protocol
(:mod:`dpcount.durable.once`), both shared with keyed runs, and the durable output of
a stream (:mod:`dpcount.durable.output`:
:class:`~dpcount.durable.output.DurableOutput`, the pending lines, input digest and
reconcile of ``dpcount count --checkpoint``, usable from a service).

The restore policy (which mechanism, the calibration check, the rebuild) lives in
:mod:`dpcount.counting.checkpoint`, which imports these; nothing here imports
:mod:`dpcount.counting` (:class:`~dpcount.durable.output.DurableOutput` takes the
caller's ``save``). This package imports nothing on its own, so that loading
the codec never loads a mechanism.
"""
