"""The replay guard's host call as an XLA FFI handler, written with :mod:`ctypes`.

The optax adapter's step ledger (:class:`dpcount.training.optax_adapter._StepLedger`)
must answer once per device step, inside ``jax.jit``. A jax host callback
(``io_callback``) costs about 0.3–1 ms a step on CPU: its arguments go through
``device_put`` and back, and a jitted function holding one (any effect) leaves jax's
C++ dispatch and runs synchronously. This module registers one XLA FFI handler (the
typed custom-call API of ``xla/ffi/api/c_api.h``, a stable C ABI) whose function is
a :mod:`ctypes` callback: XLA calls it with raw buffers; it reads the ticket's words
and writes a one-byte answer, holding the GIL only for that. Nothing is compiled and
nothing is installed. A jax primitive without a jax effect (so jax keeps its fast,
asynchronous dispatch) lowers to that custom call marked as having a side effect (so
XLA never merges two calls, hoists one out of a loop or drops one). Where the
handler cannot be registered (another jax) or jax's default backend is not the CPU,
:func:`ledger_gate` uses an unordered ``io_callback`` with the same check.

The ticket (uint32 words): the ledger's id, the run's key data, the step, and a word
the call ignores but waits for (the device step passes one computed from the draw,
so the call comes after the draw, when the dispatching Python thread has usually
released the GIL). The answer
is written 0 before anything else and 1 only after the ledger accepted the step; a
refusal (or any failure) returns an XLA error, which fails the whole computation, so
none of its outputs can be read.
"""

from __future__ import annotations

import ctypes as C
import itertools
import threading
import weakref
from typing import Any, Protocol

import numpy as np

__all__ = ["ledger_gate", "register_ledger"]

TARGET = "dpcount_step_ledger"


class Ledger(Protocol):
    """What the handler calls: record step ``t`` of ``run`` or raise ValueError."""

    def check_step(self, run: bytes, t: int) -> None: ...


# XLA FFI C API structs (xla/ffi/api/c_api.h, API version 0.3); only the fields
# read or written here, at their offsets.
class _ExtensionBase(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("type", C.c_int), ("next", C.c_void_p)]


class _ApiVersion(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("major_version", C.c_int),
        ("minor_version", C.c_int),
    ]


class _Metadata(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("api_version", _ApiVersion),
        ("traits", C.c_uint32),
        ("state_type_id", C.c_int64),
    ]


class _MetadataExtension(C.Structure):
    _fields_ = [("extension_base", _ExtensionBase), ("metadata", C.POINTER(_Metadata))]


class _Buffer(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("dtype", C.c_int),
        ("data", C.c_void_p),
        ("rank", C.c_int64),
        ("dims", C.POINTER(C.c_int64)),
    ]


class _Operands(C.Structure):  # XLA_FFI_Args and XLA_FFI_Rets have one layout
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("size", C.c_int64),
        ("types", C.POINTER(C.c_int)),
        ("buffers", C.POINTER(C.POINTER(_Buffer))),
    ]


class _Attrs(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("size", C.c_int64),
        ("types", C.c_void_p),
        ("names", C.c_void_p),
        ("attrs", C.c_void_p),
    ]


class _CallFrame(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.POINTER(_ExtensionBase)),
        ("api", C.c_void_p),
        ("ctx", C.c_void_p),
        ("stage", C.c_int),
        ("args", _Operands),
        ("rets", _Operands),
        ("attrs", _Attrs),
    ]


class _ErrorCreateArgs(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("message", C.c_char_p),
        ("errc", C.c_int),
    ]


_ErrorCreate = C.CFUNCTYPE(C.c_void_p, C.POINTER(_ErrorCreateArgs))


class _Api(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("extension_start", C.c_void_p),
        ("api_version", _ApiVersion),
        ("internal_api", C.c_void_p),
        ("error_create", _ErrorCreate),
    ]


_METADATA_EXTENSION = 1  # XLA_FFI_Extension_Metadata
_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_FAILED_PRECONDITION = 9  # XLA_FFI_Error_Code_FAILED_PRECONDITION
_U32 = C.POINTER(C.c_uint32)
_U8 = C.POINTER(C.c_uint8)

_LEDGERS: weakref.WeakValueDictionary[int, Ledger] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)
_REGISTRATION: list[bool] = []  # [registered?], decided once per process
_LOCK = threading.Lock()


def _error(frame: Any, message: str) -> Any:
    """An XLA FFI error carrying ``message`` (XLA copies it and owns the error)."""
    api = C.cast(frame.api, C.POINTER(_Api)).contents
    size, text = C.sizeof(_ErrorCreateArgs), message.encode()
    args = _ErrorCreateArgs(size, None, text, _FAILED_PRECONDITION)
    return api.error_create(C.byref(args))


def _metadata(frame: Any) -> None:
    """Answer XLA's registration-time query: the C API version the handler speaks
    (as the reference ``xla/ffi/api/api.h`` handler does), no traits, no state."""
    extension = C.cast(frame.extension_start, C.POINTER(_MetadataExtension)).contents
    metadata = extension.metadata.contents
    metadata.api_version.struct_size = C.sizeof(_ApiVersion)
    metadata.api_version.extension_start = None
    metadata.api_version.major_version, metadata.api_version.minor_version = 0, 3
    metadata.traits = 0
    metadata.state_type_id = 0


def _handle(frame_pointer: Any) -> Any:
    """The handler: answer 0, then 1 if the ledger accepts the ticket's step."""
    try:
        frame = frame_pointer.contents
        start = frame.extension_start
        if start and start.contents.type == _METADATA_EXTENSION:
            _metadata(frame)
            return None
        if frame.stage != _EXECUTE:  # as the reference handler: execute only
            return _error(frame, f"replay guard: unexpected execution stage {frame.stage}")
        answer = C.cast(frame.rets.buffers[0].contents.data, _U8)
        answer[0] = 0
        ticket = frame.args.buffers[0].contents
        size = ticket.dims[0]
        words = C.cast(ticket.data, _U32)
        ledger = _LEDGERS.get(words[0])
        if ledger is None:
            return _error(frame, "replay guard: this transformation's step ledger is gone")
        ledger.check_step(C.string_at(ticket.data + 4, 4 * (size - 3)), words[size - 2])
        answer[0] = 1
        return None
    except BaseException as exc:  # a refusal or anything else: fail the computation
        try:
            return _error(frame_pointer.contents, str(exc))
        except BaseException:  # pragma: no cover - no way left to answer XLA
            import os

            os.abort()


_HANDLER = C.CFUNCTYPE(C.c_void_p, C.POINTER(_CallFrame))(_handle)


def _registered() -> bool:
    """Register the handler once per process; False if this jax refuses it."""
    with _LOCK:
        if not _REGISTRATION:
            import jax

            try:
                capsule = jax.ffi.pycapsule(_HANDLER)  # type: ignore[no-untyped-call]
                jax.ffi.register_ffi_target(TARGET, capsule, platform="cpu")
                _REGISTRATION.append(True)
            except Exception:  # another jax or XLA C API: use jax's host callback
                _REGISTRATION.append(False)
        return _REGISTRATION[0]


def register_ledger(ledger: Ledger) -> int:
    """A process-unique id for ``ledger`` (held weakly: the handler refuses a step
    of a ledger that was garbage-collected)."""
    with _LOCK:
        ident = next(_IDS)
        _LEDGERS[ident] = ledger
    return ident


_PRIMITIVE: list[Any] = []


def _primitive() -> Any:
    """The jax primitive asking the ledger (made once): no jax effect, so a jitted
    step keeps jax's C++ dispatch, but lowered to an XLA custom call *with* a side
    effect, so XLA never merges, hoists out of a loop or drops a call."""
    with _LOCK:
        if not _PRIMITIVE:
            import jax
            import jax.numpy as jnp
            from jax.extend.core import Primitive
            from jax.interpreters import mlir

            primitive: Any = Primitive(TARGET)  # jax's Primitive is untyped
            primitive.def_abstract_eval(lambda ticket: jax.core.ShapedArray((), jnp.bool_))
            primitive.def_impl(lambda ticket: jax.jit(primitive.bind)(ticket))  # eagerly
            rule = jax.ffi.ffi_lowering(TARGET, has_side_effect=True)
            mlir.register_lowering(primitive, rule, platform="cpu")
            _PRIMITIVE.append(primitive)
        return _PRIMITIVE[0]


def ledger_gate(ident: int, key_data: Any, step: Any, after: Any = 0) -> Any:
    """The ledger's answer for ``step`` of the run keyed by ``key_data``, as a traced
    boolean (True, or the computation fails).

    On the CPU (jax's default backend) through the FFI handler; elsewhere, or if this
    jax refuses the handler, through an unordered ``jax.experimental.io_callback``
    (the same check; jax then dispatches the step through Python, synchronously).

    Args:
        ident: the ledger's id from :func:`register_ledger`.
        key_data: the run's key data (uint32 words, traced).
        step: the step asked for (int32 scalar, traced).
        after: a uint32 scalar the call waits for (and ignores): the device step
            passes one computed from the draw, so the host call comes after it.
    """
    import jax
    import jax.numpy as jnp
    from jax.experimental import io_callback

    ticket = jnp.concatenate(
        [
            jnp.full((1,), ident, jnp.uint32),
            jnp.ravel(key_data).astype(jnp.uint32),
            jnp.reshape(step, (1,)).astype(jnp.uint32),
            jnp.reshape(after, (1,)).astype(jnp.uint32),
        ]
    )
    if jax.default_backend() == "cpu" and _registered():
        return _primitive().bind(ticket)
    flag = jax.ShapeDtypeStruct((), jnp.bool_)  # type: ignore[no-untyped-call]
    return io_callback(_fallback, flag, ticket, ordered=False)


def _fallback(ticket: Any) -> np.bool_:
    """The fallback's host function: the same check, raising on refusal."""
    words = np.asarray(ticket)
    ledger = _LEDGERS.get(int(words[0]))
    if ledger is None:
        raise ValueError("replay guard: this transformation's step ledger is gone")
    ledger.check_step(words[1:-2].tobytes(), int(words[-2]))
    return np.bool_(True)
