"""The benchmark scripts (run ``python benchmarks/NAME.py --help``); :mod:`benchmarks.common` is what they share."""
