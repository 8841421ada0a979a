"""Every public name of dpcount is covered by the bad-input property tests, or excluded here.

A name newly added to a public ``__all__`` fails this test until it gets bad-input
cases in a tests/*/test_properties.py file (listed in that file's ``COVERED``) or an
entry with a reason in ``EXCLUDED`` below.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from tests.analysis import test_properties as test_properties_analysis
from tests.apps import test_properties as test_properties_apps
from tests.cli import test_properties as test_properties_cli
from tests.counting import test_properties as test_properties_counting
from tests.keyed import test_properties as test_properties_keyed
from tests.privacy import test_properties as test_properties_privacy
from tests.ranges import test_properties as test_properties_ranges

MODULES = (
    "dpcount.privacy",
    "dpcount.privacy.discrete",
    "dpcount.counting",
    "dpcount.counting.registry",
    "dpcount.analysis",
    "dpcount.ranges",
    "dpcount.apps",
    "dpcount.io",
    "dpcount.data",
    "dpcount.experiments",
    "dpcount.keyed",
    "dpcount.keyed.run",
)

_NO_INPUT = "takes no user input"
_RECORD = "a frozen result record built by the library (its fields are outputs)"
_PROTOCOL = "a Protocol/abstract interface: its implementations are covered"
_PROCESS = (
    "a noise process built by its mechanism's noise_process() from validated arguments; "
    "covered through the mechanism's release/stream"
)
_CONSTANT = "a constant, not callable"

#: (module, name) -> why it needs no bad-input tests of its own
EXCLUDED: dict[tuple[str, str], str] = {
    # dpcount.privacy
    ("dpcount.privacy", "DISCRETE_NOISE_KINDS"): _CONSTANT,
    ("dpcount.privacy", "NOISE_KINDS"): _CONSTANT,
    ("dpcount.privacy", "RNGLike"): _CONSTANT,
    ("dpcount.privacy", "Calibrated"): _RECORD,
    ("dpcount.privacy", "PrivacyGuarantee"): _RECORD,
    ("dpcount.privacy", "NoiseSampler"): _PROTOCOL,
    ("dpcount.io", "MISSING_MARKERS"): _CONSTANT,
    ("dpcount.io", "MISSING_POLICIES"): _CONSTANT,
    ("dpcount.io", "read_plain_column"): "a fast path that returns None for any text it "
    "does not parse (the caller then reads row by row with SeriesReader, whose bad-input "
    "tests name the line); its agreement with SeriesReader is tested in tests/cli",
    ("dpcount.counting.registry", "REGISTRY"): _CONSTANT,
    ("dpcount.counting.registry", "CLASSES"): _CONSTANT,
    ("dpcount.counting.registry", "Entry"): "a registry record built by the library",
    ("dpcount.privacy", "NoiseKind"): "an Enum: its values are checked where a budget is built",
    ("dpcount.privacy", "CalibrationRule"): "an Enum: checked where a budget is built",
    ("dpcount.privacy", "Neighbouring"): "an Enum of the stated relations, not user input",
    ("dpcount.privacy", "secure_generator"): _NO_INPUT,
    ("dpcount.privacy", "MissingDeltaError"): "an exception class raised by the library",
    (
        "dpcount.privacy",
        "ParticipationUnsupportedError",
    ): "an exception class raised by the library",
    ("dpcount.privacy", "PrivacyWarning"): "a warning category issued by the library",
    ("dpcount.privacy", "delta_warning"): "formats a delta the Budget has validated "
    "(tests/privacy/test_notes.py)",
    ("dpcount.privacy", "data_derived_warning"): "formats parameter names given by the library "
    "(tests/privacy/test_notes.py)",
    # dpcount.counting
    ("dpcount.counting", "NoiseProcess"): _PROTOCOL,
    ("dpcount.counting", "BLTNoiseProcess"): _PROCESS,
    ("dpcount.counting", "ToeplitzNoiseProcess"): _PROCESS,
    ("dpcount.counting", "DenseNoiseProcess"): _PROCESS,
    ("dpcount.counting", "HonakerNoiseProcess"): _PROCESS,
    ("dpcount.counting.registry", "DISCRETE_CAPABLE"): _CONSTANT,
    ("dpcount.counting", "InputNoiseProcess"): _PROCESS,
    ("dpcount.counting", "SmoothBinaryNoiseProcess"): _PROCESS,
    ("dpcount.counting", "SqrtNoiseProcess"): _PROCESS,
    ("dpcount.counting", "NormalizedSqrtNoiseProcess"): _PROCESS,
    ("dpcount.counting", "NormalizedSqrtBlockNoiseProcess"): _PROCESS,
    ("dpcount.counting", "TreeNoiseProcess"): _PROCESS,
    ("dpcount.counting.registry", "MECHANISMS"): _CONSTANT,
    ("dpcount.counting.registry", "GAUSSIAN_ONLY"): _CONSTANT,
    # dpcount.analysis
    ("dpcount.analysis", "METRICS"): _CONSTANT,
    ("dpcount.analysis", "Candidate"): _RECORD,
    ("dpcount.analysis", "CbNormBounds"): _RECORD,
    ("dpcount.analysis", "DeltaThreshold"): _RECORD,
    ("dpcount.analysis", "TreeChoice"): _RECORD,
    ("dpcount.analysis", "Recommendation"): _RECORD,
    ("dpcount.analysis", "GaussianBounds"): _RECORD,
    ("dpcount.analysis", "Choice"): _RECORD,
    ("dpcount.analysis", "AutoReason"): _RECORD,
    ("dpcount.analysis", "NoiseNote"): _RECORD,
    ("dpcount.analysis", "Reference"): _RECORD,
    ("dpcount.analysis", "Certificate"): _RECORD,
    ("dpcount.analysis", "Objective"): "an Enum: checked where an objective is given",
    ("dpcount.analysis", "huu_leading_constant"): _NO_INPUT,
    # dpcount.ranges
    ("dpcount.ranges", "MECHANISMS"): _CONSTANT,
    ("dpcount.ranges", "NEIGHBOURING"): _CONSTANT,
    ("dpcount.ranges", "MonteCarloEstimate"): _RECORD,
    ("dpcount.ranges", "PaperEstimate"): _RECORD,
    # dpcount.apps
    ("dpcount.apps", "LocalMedianResult"): _RECORD,
    ("dpcount.apps", "TopItem"): _RECORD,
    ("dpcount.apps", "edge_count_sensitivity"): _NO_INPUT,
    # dpcount.data
    ("dpcount.data", "load_searchlogs"): _NO_INPUT,
    ("dpcount.data", "load_table"): "reads a file shipped with the package, named by the library",
    # dpcount.experiments
    ("dpcount.experiments", "EXPERIMENTS"): _CONSTANT,
    # dpcount.counting
    ("dpcount.counting", "Strategy"): _PROTOCOL,
    ("dpcount.counting", "Capabilities"): "a declaration in the registry's source (its "
    "checks against each class: tests/counting/test_registry.py)",
    ("dpcount.counting", "Option"): "a declaration in the registry's source; its checks of "
    "values are tested in tests/counting/test_registry.py",
    ("dpcount.experiments", "Comparison"): _RECORD,
    (
        "dpcount.experiments",
        "ExperimentConfig",
    ): "a record built by run_experiment from validated arguments",
    ("dpcount.experiments", "ExperimentResult"): _RECORD,
    # dpcount.keyed.run
    ("dpcount.keyed.run", "KeyedJob"): "a record built by keyed_counts (make_job) from "
    "validated arguments",
    ("dpcount.keyed.run", "KeyedResult"): _RECORD,
}

TEST_MODULES = (
    test_properties_analysis,
    test_properties_apps,
    test_properties_cli,
    test_properties_counting,
    test_properties_keyed,
    test_properties_privacy,
    test_properties_ranges,
)


def covered() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for module in TEST_MODULES:
        for name, names in module.COVERED.items():
            out |= {(name, n) for n in names}
    return out


def public_names() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for name in MODULES:
        module = importlib.import_module(name)
        out |= {(name, n) for n in module.__all__}
    return out


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_is_covered_or_excluded(module: str) -> None:
    names = {pair for pair in public_names() if pair[0] == module}
    missing = sorted(n for m, n in names - covered() - EXCLUDED.keys())
    assert not missing, f"{module}: add bad-input property tests (or an exclusion) for {missing}"


def test_the_coverage_table_names_only_public_names() -> None:
    stale = (covered() | EXCLUDED.keys()) - public_names()
    assert not stale, f"not in any public __all__ (renamed or removed?): {sorted(stale)}"
    both = covered() & EXCLUDED.keys()
    assert not both, f"both covered and excluded: {sorted(both)}"


def test_exclusions_take_no_user_input_or_are_records() -> None:
    """An exclusion 'takes no user input' only if the callable really has no parameters."""
    for (module, name), reason in EXCLUDED.items():
        obj = getattr(importlib.import_module(module), name)
        if reason == _NO_INPUT:
            assert callable(obj) and not inspect.signature(obj).parameters, (module, name)
        if reason == _CONSTANT:
            assert not callable(obj) or isinstance(obj, (dict, tuple, str)), (module, name)
