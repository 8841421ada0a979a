"""Durable streams: save a :class:`~dpcount.counting.CountingStream` and restore it.

:func:`save_stream` writes a checkpoint; :func:`load_stream` rebuilds the stream,
which then continues exactly as the uninterrupted one would: the same outputs,
bit for bit, for the same inputs, and no noise value is ever drawn twice (the
generator's state and the samples it drew but the stream has not used yet are
both saved). This module is the restore *policy* (which mechanisms, the
calibration and budget check, the rebuild); the file codec is
:mod:`dpcount.durable.format`, the generator-state check
:mod:`dpcount.durable.generators`, the atomic write :mod:`dpcount.durable.atomic`.

What a checkpoint holds:

* the mechanism's configuration (:meth:`CountingMechanism.config`: class name and
  constructor arguments; a :class:`~dpcount.counting.FactorizationMechanism`'s
  ``L`` and ``R``), from which it is rebuilt on load. The rebuilt sampler and
  privacy guarantee must equal the saved ones, or the checkpoint is refused (for
  example, a dpcount version that calibrates differently);
* the step, the vector length, the running sum (exact: ints stay ints);
* the noise process's state (``state_dict()``: the live noise values and the
  noise buffer's drawn-but-unused samples);
* the generator's class and full state, **including its key**;
* a small JSON ``extra`` dict of the caller's (the CLI keeps its unconfirmed
  output lines there).

Trust model:

* **A checkpoint is as sensitive as the raw data.** The generator's key lets
  anyone recompute every noise value the stream has drawn or will draw; with the
  released outputs that gives back the exact data, and with future outputs the
  future data. Whoever can *write* a checkpoint can already do anything to the
  stream's privacy (e.g. set the noise to zero), so the file must be protected
  like the data: created with mode 0600; store and delete it like the data itself.
* **Loading is safe on a hostile file.** The SHA-256 at the end detects accidents,
  not tampering (a forger recomputes it). So loading checks every field — type,
  dtype, shape, range, nesting depth — before anything reaches numpy, a mechanism
  constructor or a bit generator's state setter (whose C code trusts its input:
  an unchecked state crashes the interpreter), and refuses with a
  :class:`ValueError` naming the file and the field. It never executes code.
* **Resume a checkpoint at most once.** Two streams restored from one file add the
  *same* noise to whatever data each is given; releasing both reveals the
  difference of the data (the noise cancels), a privacy loss no budget accounts
  for. The library cannot see copies of a file; ``dpcount count --checkpoint``
  prevents it for its own runs: it holds an exclusive ``flock`` on
  ``<checkpoint>.lock`` while it runs (a second concurrent resume is refused),
  it replaces the checkpoint after every batch (so a later run resumes from the
  newest state, never re-releasing a step) and checks the consumed input against
  a saved digest (so the saved noise is never applied to different data). Copying
  the file and resuming the copy elsewhere is not prevented: don't.

Loading refuses, with a :class:`ValueError` naming the file and the problem:
wrong magic bytes, an unknown format version, a truncated file, trailing bytes, a
checksum mismatch, a header out of bounds (nesting, integer size, non-finite
numbers), an unknown mechanism or generator class, a generator state whose
structure or ranges differ from the class's own, constructor arguments of the
wrong type, a state that does not check out (e.g. step > horizon, digits that do
not spell the step), a recalibration that differs, and (with ``expect=``) a
different mechanism or horizon than the caller's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array, state_value
from dpcount._version import __version__
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.registry import CLASSES, class_capabilities
from dpcount.counting.strategy import Option, OptionType
from dpcount.durable import atomic
from dpcount.durable.format import (
    FORMAT_VERSION,
    Encoder,
    check_depth,
    decode,
    encode_file,
    parse,
)
from dpcount.durable.generators import (
    bit_generator_name,
    bit_generators,
    check_generator_state,
)

__all__ = ["CheckpointMismatchError", "load_stream", "save_stream"]

#: mechanism classes a checkpoint may name (rebuilt with their constructor)
_MECHANISMS = CLASSES

_HEADER_KEYS = frozenset(
    {
        "arrays",
        "dim",
        "dpcount_version",
        "extra",
        "format",
        "horizon",
        "mechanism",
        "privacy",
        "process",
        "rng",
        "sampler",
        "step",
        "stream",
    }
)
_MAX_KWARG_INT = 1 << 63
_MAX_STR = 64


def _fields(obj: Any) -> dict[str, Any]:
    """The compared fields of a dataclass instance (shallow, unlike dataclasses.asdict)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.compare}


def _sampler_description(sampler: Any) -> dict[str, Any]:
    """Class name and parameters of a sampler (its compared dataclass fields)."""
    if not dataclasses.is_dataclass(sampler) or isinstance(sampler, type):
        raise ValueError(
            f"cannot checkpoint a stream with sampler {sampler!r}: its parameters are unknown"
        )
    return {"class": type(sampler).__name__, "fields": _fields(sampler)}


def _canonical(value: Any, where: str = "value") -> str:
    """A value without arrays as canonical JSON (for equality checks and messages)."""
    enc = Encoder()
    text = json.dumps(enc.encode(value, where), sort_keys=True, allow_nan=False)
    if enc.arrays:
        raise ValueError(f"corrupt header: {where} holds an array")
    return text


# -- save -------------------------------------------------------------------------------
def _check_extra(extra: Any) -> Any:
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict or None, got {type(extra).__name__}")
    try:
        text = json.dumps(extra, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"extra must be JSON-able (str keys, finite numbers): {err}") from None
    return json.loads(text)


def _pieces(stream: CountingStream, extra: Any) -> list[bytes]:
    """The checkpoint file's bytes, in pieces, ending with the SHA-256 digest."""
    m = stream.mechanism
    if m.privacy is None:
        raise ValueError(
            "cannot checkpoint a stream of a mechanism without a privacy guarantee "
            "(with_sampler is a testing hook)"
        )
    if _MECHANISMS.get(type(m).__name__) is not type(m):
        raise ValueError(
            f"cannot checkpoint a stream of {type(m).__name__}: a checkpoint rebuilds its "
            f"mechanism, which must be one of {', '.join(sorted(_MECHANISMS))}"
        )
    rng = m._rng
    enc = Encoder()
    process = stream._process
    header = {
        "format": FORMAT_VERSION,
        "dpcount_version": __version__,
        "mechanism": enc.encode(m.config(), "mechanism config"),
        "sampler": enc.encode(_sampler_description(m.sampler), "sampler"),
        "privacy": enc.encode(_fields(m.privacy), "privacy guarantee"),
        "horizon": m.horizon,
        "step": stream.step,
        "dim": stream.dim,
        "stream": {"integer": stream._integer, "sum": enc.encode(stream._sum, "running sum")},
        "rng": {
            "class": bit_generator_name(rng.bit_generator),
            "state": enc.encode(rng.bit_generator.state, "generator state"),
        },
        "process": None if process is None else enc.encode(process.state_dict(), "process state"),
        "extra": _check_extra(extra),
    }
    check_depth(header, "cannot save: header")  # what load accepts (extra is the caller's)
    return encode_file(header, enc.arrays)


def save_stream(
    stream: CountingStream, path: str | os.PathLike[str], extra: dict[str, Any] | None = None
) -> None:
    """Write a checkpoint of ``stream`` to ``path`` atomically (see the module docstring).

    Saving does not change the stream, and saving twice without steps in between
    writes identical bytes.

    Raises:
        ValueError: the mechanism has no privacy guarantee (a ``with_sampler``
            copy), its generator or sampler cannot be saved, or ``extra`` is not
            JSON-able (or nested deeper than a checkpoint may be).
        TypeError: ``extra`` is not a dict or None.
        OSError: the file cannot be written.
    """
    if not isinstance(stream, CountingStream):
        raise TypeError(f"stream must be a CountingStream, got {type(stream).__name__}")
    name = atomic.check_path(path)
    atomic.write_atomic(name, _pieces(stream, extra))


# -- load -------------------------------------------------------------------------------
def _field(header: Mapping[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    value = header[key]
    if isinstance(value, bool) and bool not in types:
        raise ValueError(f"corrupt header: {key} must be {what}, got {value!r:.40}")
    if not isinstance(value, types):
        raise ValueError(f"corrupt header: {key} must be {what}, got {value!r:.40}")
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and a.tobytes() == b.tobytes()
        )
    return bool(a == b) and (a is None) == (b is None)


def _describe_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"{value!r:.80}"


class CheckpointMismatchError(ValueError):
    """A valid checkpoint of a mechanism configured differently from ``expect``.

    Attributes:
        fields: the constructor arguments that differ (e.g. ``("horizon",)``), so a
            front end can explain a difference without reading the message.
    """

    def __init__(self, message: str, *, fields: tuple[str, ...]) -> None:
        super().__init__(message)
        self.fields = fields


def _check_expected(config: Mapping[str, Any], expect: CountingMechanism) -> None:
    want = expect.config()
    if config["class"] != want["class"]:
        raise ValueError(
            f"it holds a {config['class']:.60} stream, expected a {want['class']} "
            f"(refusing to continue a different mechanism)"
        )
    saved, wanted = config["kwargs"], want["kwargs"]
    keys = [k for k in sorted(set(saved) | set(wanted)) if not _same(saved.get(k), wanted.get(k))]
    if keys:
        diffs = [
            f"{key}: saved {_describe_value(saved.get(key))}, expected "
            f"{_describe_value(wanted.get(key))}"
            for key in keys
        ]
        raise CheckpointMismatchError(
            f"it was saved for a different {config['class']:.60} than expected ("
            + "; ".join(diffs)
            + ")",
            fields=tuple(keys),
        )


def _rebuild_generator(rng_header: Any, arrays: list[NDArray[Any]]) -> tuple[Any, Any]:
    """A new Generator of the saved class in the saved state; also the decoded state.

    The state is checked field by field against the class's own structure
    (:func:`~dpcount.durable.generators.check_generator_state`) before the setter
    sees it: the setters are C code that trusts its input."""
    if not isinstance(rng_header, dict) or set(rng_header) != {"class", "state"}:
        raise ValueError("corrupt header: rng must hold class and state")
    name = rng_header["class"]
    classes = bit_generators()
    if not isinstance(name, str) or name not in classes:
        raise ValueError(
            f"unknown generator class {name!r:.60} (supported: {', '.join(sorted(classes))})"
        )
    state = decode(rng_header["state"], arrays, "rng.state")
    try:
        check_generator_state(name, state)
    except ValueError as err:
        raise ValueError(f"corrupt generator state for {name}: {err}") from None
    bit_generator = classes[name]()
    try:  # a safety net only: the check above admits what the setter accepts
        bit_generator.state = state
    except (ValueError, TypeError, KeyError, OverflowError) as err:  # pragma: no cover
        raise ValueError(f"corrupt generator state for {name}: {err}") from None
    return np.random.Generator(bit_generator), state


def _check_kwarg(cls: type[CountingMechanism], key: Any, value: Any) -> None:
    """A constructor argument as :meth:`CountingMechanism.config` writes it: None, a
    bool, an int64, a finite float, a short str, a list or matrix the class declares
    (its capabilities' ``saved`` options: a BLT's ``buffer_decay``/``output_scale``, a
    Toeplitz factorization's ``coefficients``, a dense factorization's ``L``/``R``,
    with their bounds), or (``participation``) the budget's schema as a dict of two
    positive ints. The constructor then checks the values themselves."""
    where = f"mechanism.kwargs.{str(key)[:40]}"
    if not isinstance(key, str) or not key.isidentifier() or len(key) > _MAX_STR:
        raise ValueError(f"corrupt header: {where}: not an argument name")
    declared = class_capabilities(cls.__name__).saved_option(key)
    if declared is not None:
        _check_declared(declared, value, where)
    elif key == "participation" and value is not None:
        _check_schema(value, where)
    else:
        _check_scalar(value, where)


def _check_declared(option: Option, value: Any, where: str) -> None:
    """A list or matrix argument the class declares, within its declared bounds."""
    if option.accepts(value) and value is not None:
        return
    if option.type is OptionType.MATRIX:
        raise ValueError(f"corrupt header: {where} must be a 2-D float64 array")
    raise ValueError(f"corrupt header: {where} must be a list of 1 to {option.high} finite floats")


def _check_schema(value: Any, where: str) -> None:
    """The budget's (k, b)-participation schema: {"max_participations", "min_separation"}."""
    if not (
        isinstance(value, dict)
        and set(value) == {"max_participations", "min_separation"}
        and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v < _MAX_KWARG_INT
            for v in value.values()
        )
    ):
        raise ValueError(
            f"corrupt header: {where} must be a dict of max_participations and "
            "min_separation (integers >= 1)"
        )


def _check_scalar(value: Any, where: str) -> None:
    """None, a bool, an int64, a float or a short str."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -_MAX_KWARG_INT <= value < _MAX_KWARG_INT:
            raise ValueError(f"corrupt header: {where}: integer {value} is out of range")
    elif isinstance(value, str):
        if len(value) > _MAX_STR:
            raise ValueError(f"corrupt header: {where}: string longer than {_MAX_STR}")
    elif value is not None and not isinstance(value, (bool, float)):
        raise ValueError(f"corrupt header: {where}: unexpected {type(value).__name__}")


def _saved_config(header: dict[str, Any], arrays: list[NDArray[Any]]) -> dict[str, Any]:
    """The saved mechanism config, its class known and its arguments of expected types."""
    config = decode(header["mechanism"], arrays, "mechanism")
    if (
        not isinstance(config, dict)
        or set(config) != {"class", "kwargs"}
        or not isinstance(config["kwargs"], dict)
    ):
        raise ValueError("corrupt header: mechanism must hold class and kwargs")
    cls = _MECHANISMS.get(config["class"]) if isinstance(config["class"], str) else None
    if cls is None:
        raise ValueError(
            f"unknown mechanism class {config['class']!r:.60} "
            f"(supported: {', '.join(sorted(_MECHANISMS))})"
        )
    for key, value in config["kwargs"].items():
        _check_kwarg(cls, key, value)
    return config


def _rebuild_mechanism(
    header: dict[str, Any], arrays: list[NDArray[Any]], expect: CountingMechanism | None
) -> tuple[CountingMechanism, np.random.Generator, Any]:
    """The mechanism rebuilt from its config with the saved generator; refuses a
    different calibration than the saved one (or than ``expect``)."""
    saved_version = _field(header, "dpcount_version", (str,), "a string")
    config = _saved_config(header, arrays)
    cls = _MECHANISMS[config["class"]]
    if expect is not None:
        _check_expected(config, expect)
    generator, rng_state = _rebuild_generator(header["rng"], arrays)
    try:
        mechanism = cls(**config["kwargs"], rng=generator)
    except (TypeError, ValueError, ArithmeticError) as err:  # ArithmeticError: a safety net
        raise ValueError(f"cannot rebuild the {cls.__name__}: {err}") from None
    saved_sampler = _canonical(decode(header["sampler"], arrays, "sampler"), "sampler")
    saved_privacy = _canonical(decode(header["privacy"], arrays, "privacy"), "privacy")
    rebuilt_sampler = _canonical(_sampler_description(mechanism.sampler))
    rebuilt_privacy = _canonical(None if mechanism.privacy is None else _fields(mechanism.privacy))
    if saved_sampler != rebuilt_sampler or saved_privacy != rebuilt_privacy:
        raise ValueError(
            f"the rebuilt {cls.__name__} is calibrated differently from the saved one "
            f"(saved by dpcount {saved_version:.40}, this is {__version__}): saved sampler "
            f"{saved_sampler:.300}, guarantee {saved_privacy:.300}; rebuilt sampler "
            f"{rebuilt_sampler}, guarantee {rebuilt_privacy}"
        )
    return mechanism, generator, rng_state


def _check_header(header: dict[str, Any]) -> None:
    """The header holds exactly the expected keys, in this format version."""
    if set(header) != _HEADER_KEYS:
        missing = ", ".join(sorted(_HEADER_KEYS - set(header))) or "none"
        unknown = ", ".join(sorted(str(k)[:40] for k in set(header) - _HEADER_KEYS)) or "none"
        raise ValueError(f"corrupt header (missing: {missing}; unknown: {unknown})")
    if type(header["format"]) is not int or header["format"] != FORMAT_VERSION:
        raise ValueError(f"corrupt header: format {header['format']!r:.40} != {FORMAT_VERSION}")


def _position(header: dict[str, Any], mechanism: CountingMechanism) -> tuple[int, int | None]:
    """The saved step and vector length, checked against the rebuilt mechanism."""
    horizon = _field(header, "horizon", (int,), "an int")
    if horizon != mechanism.horizon:
        raise ValueError(
            f"corrupt header: horizon {horizon} != the mechanism's {mechanism.horizon}"
        )
    step = _field(header, "step", (int,), "an int")
    if not 0 <= step <= horizon:
        raise ValueError(f"corrupt header: step {step} is outside [0, horizon={horizon}]")
    dim = header["dim"]
    if dim is not None and (type(dim) is not int or dim < 1):
        raise ValueError(f"corrupt header: dim must be None or an int >= 1, got {dim!r:.40}")
    process_state = header["process"]
    if (step == 0) != (process_state is None) or (step == 0 and dim is not None):
        raise ValueError(
            f"corrupt header: step {step} with dim {dim!r:.40} and process {process_state!r:.40}"
        )
    return step, dim


def _load_stream_state(
    stream: CountingStream,
    header: dict[str, Any],
    arrays: list[NDArray[Any]],
    position: tuple[int, int | None],
) -> None:
    """The saved running sum and noise process loaded into the fresh ``stream``."""
    step, dim = position
    saved_stream = header["stream"]
    if not isinstance(saved_stream, dict) or set(saved_stream) != {"integer", "sum"}:
        raise ValueError("corrupt header: stream must hold integer and sum")
    if saved_stream["integer"] is not stream._integer:
        raise ValueError("corrupt header: stream.integer does not match the sampler")
    total = decode(saved_stream["sum"], arrays, "stream.sum")
    if step == 0:
        if not _same(total, stream._sum) or type(total) is not type(stream._sum):
            raise ValueError(f"corrupt header: running sum {total!r:.40} at step 0")
        return
    total = _check_sum(total, dim, stream._integer)  # first: bounds dim by the file
    process = stream._start(dim)
    process.load_state_dict(decode(header["process"], arrays, "process"))
    if process.step != step:
        raise ValueError(f"corrupt state: the process is at step {process.step}, not {step}")
    stream._sum, stream._t = total, step


def _restore(
    header: dict[str, Any], arrays: list[NDArray[Any]], expect: CountingMechanism | None
) -> CountingStream:
    _check_header(header)
    mechanism, generator, rng_state = _rebuild_mechanism(header, arrays, expect)
    position = _position(header, mechanism)
    stream = mechanism.stream()
    _load_stream_state(stream, header, arrays, position)
    # Last: making a process may draw (the dense process draws z at once); the
    # generator must continue from the saved state.
    generator.bit_generator.state = rng_state
    extra = header["extra"]
    if extra is not None and not isinstance(extra, dict):
        raise ValueError("corrupt header: extra must be a dict or null")
    stream.extra = extra
    return stream


def _check_sum(total: Any, dim: int | None, integer: bool) -> Any:
    owner = "CountingStream"
    if dim is not None:
        dtype = np.int64 if integer else np.float64
        arr = state_array(owner, "sum", total, rows=None, dim=dim, dtypes=(dtype,))
        _check_sum_range(owner, float(np.max(np.abs(arr), initial=0.0)), integer)
        return arr
    value = state_value(owner, "sum", total, None)
    want = (int, np.integer) if integer else (float, np.floating)
    if not isinstance(value, want):
        raise ValueError(
            f"corrupt {owner} state: sum must be {'an integer' if integer else 'a float'}, "
            f"got {value!r}"
        )
    _check_sum_range(owner, abs(float(value)), integer)
    return value


def _check_sum_range(owner: str, magnitude: float, integer: bool) -> None:
    """A running sum the stream itself could never have reached is refused: continuous
    paths keep |sum| < 2^53 (exact float64 sums), integer paths < 2^62 (int64 headroom)."""
    bound = 2.0**62 if integer else 2.0**53
    if not magnitude < bound:
        raise ValueError(
            f"corrupt {owner} state: sum must have magnitude < 2^{62 if integer else 53}, "
            f"got {magnitude:.6g}"
        )


def load_stream(
    path: str | os.PathLike[str], expect: CountingMechanism | None = None
) -> CountingStream:
    """Restore a stream saved with :func:`save_stream`.

    The mechanism is rebuilt from the saved configuration with a generator in the
    saved state; the stream continues exactly where the saved one was (the same
    outputs for the same inputs, bit for bit). ``stream.extra`` is the saved
    ``extra`` dict (or None).

    Args:
        path: the checkpoint file.
        expect: if given, the mechanism the caller means to continue: the
            checkpoint must have been saved for the same class with the same
            constructor arguments (horizon, budget, noise, calibration,
            sensitivities, structure). Its own generator is not used.

    Raises:
        ValueError: naming the file and the problem (see the module docstring):
            not a checkpoint, unknown version, truncated, corrupt, inconsistent
            state, recalibrated differently, or not what ``expect`` describes.
        OSError: the file cannot be read.
    """
    name = atomic.check_path(path)
    if expect is not None and not isinstance(expect, CountingMechanism):
        raise TypeError(f"expect must be a CountingMechanism or None, got {type(expect).__name__}")
    with open(name, "rb") as fh:
        data = fh.read()
    try:
        header, arrays = parse(data)
        return _restore(header, arrays, expect)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(f"checkpoint {name}: {err}", fields=err.fields) from None
    except ValueError as err:
        raise ValueError(f"checkpoint {name}: {err}") from None
    except (
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        ArithmeticError,
        RecursionError,
    ) as err:
        # A safety net: every field is checked above, but a refusal must never
        # surface as anything but a ValueError naming the file.
        raise ValueError(f"checkpoint {name}: corrupt ({type(err).__name__}: {err})") from None
