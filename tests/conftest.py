import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

# `make test` uses "default"; `pytest --hypothesis-profile=ci` runs more examples, "dev" fewer.
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("default", max_examples=60, **_common)
settings.register_profile("ci", max_examples=300, **_common)
settings.register_profile("dev", max_examples=15, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
