"""The noise key is bound to the run and the whole configuration (issue 18, item 2),
and keyed sums never wrap or round silently (item 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.prf import PRFKey
from dpcount.keyed.secret import Label, RunSecret, unsafe_testing_secret
from tests.keyed._budget import keyed_counts

SECRET = unsafe_testing_secret(b"binding test secret, tests only")
KEYS = [f"k{i}" for i in range(200)]


def _events(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"t": rng.integers(0, 8, n), "key": rng.choice(KEYS, n)})


def _noise(keys: list[str], **extra: Any) -> pd.DataFrame:
    """Released minus exact running counts, one column per key (rows: steps 1..8)."""
    events = _events()
    kw: dict[str, Any] = dict(
        keys=keys, time_column="t", key_column="key", step=1, start=0, horizon=8,
        epsilon=1.0, secret=SECRET, mechanism="tree",
    )  # fmt: skip
    kw.update(extra)
    frame = keyed_counts(events, **kw).frame
    assert frame is not None
    got = frame.pivot(index="step", columns="key", values="private_count")
    exact = events.assign(step=events["t"] + 1).groupby(["step", "key"]).size().unstack(0)
    exact = exact.T.reindex(index=range(1, 9), columns=got.columns, fill_value=0)
    return (got - exact.fillna(0).cumsum()).astype(float)


def test_reordered_universe_gets_independent_noise() -> None:
    """Same bytes, keys in reverse order: release1[a] − release2[b] is not C_a − C_b
    (with the noise indexed by position alone it was, at every step)."""
    one = _noise(KEYS)
    two = _noise(KEYS[::-1])
    # key KEYS[i] sits at position i in run one and at position 199 − i in run two:
    # compare the noise at the same *position*
    same_position = one[KEYS].to_numpy() - two[KEYS[::-1]].to_numpy()
    assert np.count_nonzero(same_position) > 0.9 * same_position.size
    assert not np.allclose(one[KEYS].to_numpy(), two[KEYS].to_numpy())


@pytest.mark.parametrize(
    "change", [{"epsilon": 2.0}, {"start": -1}, {"horizon": 9}, {"max_weight": 2}]
)
def test_other_configuration_gets_uncorrelated_noise(change: dict[str, Any]) -> None:
    """Step 1 of 200 keys (one tree leaf each): with the same PRF words the two noises
    were a monotone function of each other (correlation ~1); independent noise has a
    sample correlation within 5 standard errors (1/sqrt(200)) of 0."""
    one = _noise(KEYS, noise="laplace").loc[1].to_numpy()
    two = _noise(KEYS, **{"noise": "laplace", **change}).loc[1].to_numpy()
    corr = float(np.corrcoef(one, two)[0, 1])
    assert abs(corr) < 5 / np.sqrt(len(KEYS))


def test_prf_key_depends_on_every_part() -> None:
    base = RunSecret(b"s" * 32, "r1", {"a": 1, "keys_sha256": "x"})
    keys = {
        base.prf(Label.NOISE),
        RunSecret(b"t" * 32, "r1", base.config).prf(Label.NOISE),
        RunSecret(b"s" * 32, "r2", base.config).prf(Label.NOISE),
        RunSecret(b"s" * 32, "r1", {"a": 2, "keys_sha256": "x"}).prf(Label.NOISE),
        RunSecret(b"s" * 32, "r1", {"a": 1, "keys_sha256": "y"}).prf(Label.NOISE),
        base.prf(Label.SELECTION),
        base.prf(Label.SPARSE_VECTOR),
    }
    assert len(keys) == 7 and PRFKey(b"s" * 32) not in keys


def test_raw_bytes_secret_is_refused() -> None:
    with pytest.raises(TypeError, match="not bytes: raw secret bytes have no place"):
        keyed_counts(
            _events(), keys=KEYS, time_column="t", key_column="key", step=1, start=0,
            horizon=8, epsilon=1.0, secret=b"0123456789abcdef0123",
        )  # fmt: skip
    with pytest.raises(TypeError, match="RunSecret that is not a file's"):
        keyed_counts(
            _events(), keys=KEYS, time_column="t", key_column="key", step=1, start=0,
            horizon=8, epsilon=1.0, secret=RunSecret.in_memory(b"0" * 32, {}),
        )  # fmt: skip


def test_testing_secret_is_refused_with_a_state(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="state= needs a secret file"):
        keyed_counts(
            _events(), keys=KEYS, time_column="t", key_column="key", step=1, start=0,
            horizon=8, epsilon=1.0, secret=SECRET, state=tmp_path / "s", until=4,
        )  # fmt: skip


# ---------------------------------------------------------------- item 6: exact sums
def _big(weights: list[float], steps: list[int], noise: str) -> dict[str, Any]:
    events = pd.DataFrame({"t": steps, "key": ["a"] * len(steps), "w": weights})
    return dict(
        events=events, keys=["a", "b"], time_column="t", key_column="key", weight_column="w",
        step=1, start=0, horizon=4, secret=SECRET, noise=noise, max_weight=2**53,
        # a large epsilon keeps the discrete Laplace scale within its sampler's range
        epsilon=2.0**30 if noise == "discrete-laplace" else 1.0,
    )  # fmt: skip


@pytest.mark.parametrize("noise", ["discrete-laplace", "laplace"])
def test_step_sum_beyond_2_53_is_refused(noise: str) -> None:
    """1100 events of weight 2^53 in one step: int64 wrapped to a negative count."""
    kw = _big([2.0**53] * 1100, [0] * 1100, noise)
    with pytest.raises(ValueError, match=r"key 'a': the contributions of step 1 add up to"):
        keyed_counts(kw.pop("events"), **kw)


@pytest.mark.parametrize("noise", ["discrete-laplace", "laplace"])
def test_running_sum_beyond_2_53_is_refused(noise: str) -> None:
    """Steps of 0.75·2^52 each: the running sum reaches 2^53 at step 3."""
    w = 3 * 2.0**50
    kw = _big([w, w, w, 1.0], [0, 1, 2, 3], noise)
    with pytest.raises(ValueError, match=r"key 'a': the running sum at step 3 reaches"):
        keyed_counts(kw.pop("events"), **kw)
    below = _big([w, w, 1.0], [0, 1, 3], noise)  # 1.5·2^52 + 1 < 2^53: released
    frame = keyed_counts(below.pop("events"), **below).frame
    assert frame is not None and len(frame) == 8


def test_running_sum_from_a_stored_state_is_checked(tmp_path: Path) -> None:
    """Exact sums carried by a state (here re-written near 2^53 with the secret) count."""
    import json

    import numpy as np

    from dpcount.keyed.state import RunState

    kw: dict[str, Any] = dict(
        keys=["a", "b"], time_column="t", key_column="key", step=1, start=0, horizon=4,
        epsilon=1.0, secret=tmp_path / "run.key", state=tmp_path / "run.state",
        mechanism="honaker",  # exact rational noise: its state holds no noise buffers
    )  # fmt: skip
    keyed_counts(pd.DataFrame({"t": [0, 1], "key": ["a", "b"]}), until=2, **kw)
    config = json.loads((tmp_path / "run.key").read_text())["config"]
    secret = RunSecret.load(tmp_path / "run.key", config)
    big = np.array([2**53 - 3, 0], dtype=np.int64)
    RunState(secret.run_id, secret.fingerprint, 2, big).save(tmp_path / "run.state", secret)
    events = pd.DataFrame({"t": [2, 2, 3, 3], "key": ["a", "a", "a", "a"]})
    with pytest.raises(ValueError, match=r"key 'a': the running sum at step 4 reaches"):
        keyed_counts(events, until=4, **kw)


def test_labelled_keys_are_the_stated_hmacs() -> None:
    """Every labelled key is the HMAC its docstring states (recomputed here from the
    bytes): the PRF streams through the words, the MAC keys through a MAC."""
    import hashlib
    import hmac

    from dpcount.keyed.prf import PositionPRF
    from dpcount.keyed.secret import MacLabel
    from tests.keyed._keys import noise_key, sub_key

    raw, config = b"k" * 32, {"a": 1, "keys_sha256": "x"}
    secret = RunSecret(raw, "run-7", config)
    noise = noise_key(raw, config, "run-7")
    expected = {
        Label.NOISE: noise,
        Label.SELECTION: sub_key(noise, b"dpcount/keyed/key-selection"),
        Label.SPARSE_VECTOR: sub_key(noise, b"dpcount/keyed/sparse-vector"),
    }
    for label, key in expected.items():
        got = secret.prf(label).stream("stream/x", 8).rectangle(1, 3, 5, 2, 11)
        assert np.array_equal(got, PositionPRF(key, "stream/x", 8).rectangle(1, 3, 5, 2, 11))
    for label in MacLabel:
        text, bound = label.value
        key = hmac.new(raw, text + b"\0run-7" if bound else text, hashlib.sha256).digest()
        want = hmac.new(key, b"body", hashlib.sha256).hexdigest()
        assert secret.mac(label).hexdigest(b"body") == want
        assert secret.mac(label).verify(want, b"body")
        assert not secret.mac(label).verify(want[:-1] + "0", b"body") or want[-1] == "0"
    assert (
        secret.mac(MacLabel.UNIT_RANK).hash_key()
        == hmac.new(raw, b"unit-rank", hashlib.sha256).hexdigest()[:16]
    )
    with pytest.raises(TypeError, match="Label"):
        secret.prf("noise")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MacLabel"):
        secret.mac(Label.NOISE)  # type: ignore[arg-type]
    assert raw.hex() not in repr(secret) + repr(secret.prf(Label.NOISE)) + repr(
        secret.mac(MacLabel.STATE)
    )


def test_no_raw_key_leaves_the_secret_module() -> None:
    """Gate: outside keyed/secret.py and keyed/prf.py no code reads a key's bytes — no
    ``prf_key``/``derived_key`` (the 0.4 accessors), no ``._secret`` (nor, in keyed/,
    ``._key``: the bytes of a PRF or MAC key), no ``.secret.secret``."""
    import ast
    import re

    import dpcount

    root = Path(dpcount.__file__).parent
    allowed = {root / "keyed" / "secret.py", root / "keyed" / "prf.py"}
    banned = {"prf_key", "derived_key", "_secret"}
    found = []
    for path in sorted(root.rglob("*.py")):
        if path in allowed:
            continue
        text = path.read_text(encoding="utf-8")
        if not re.search(r"\b(prf_key|derived_key|_secret|_key)\b|\.secret\.secret\b", text):
            continue  # (parsing only the files that name one: the gate stays cheap)
        for node in ast.walk(ast.parse(text)):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else node.arg
                if isinstance(node, ast.arg)
                else None
            )
            if name in banned or (name == "_key" and path.parent.name == "keyed"):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "secret"
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "secret"
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: .secret.secret")
    assert not found, found
