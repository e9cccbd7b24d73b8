"""How each recorded-number fixture under ``tests/data`` is compared, so the suite passes on any CPU.

Numbers recorded on one machine are read on others: another CPU (AVX-512, AVX2 or baseline
kernels; MKL takes other paths on Intel than on AMD), another thread count, another numpy SIMD
target. Every fixture is declared here in one of two modes, and ``tests/project/test_recorded_fixtures.py``
checks that the declarations cover every file and that the "exact" ones hold:

* :class:`CrossMachineExact`: the numbers are bit-identical on every machine because of how they
  are computed (strings, integers, Python floats in a fixed order; no BLAS, no SIMD reduction
  and no sort whose order of equal keys depends on the CPU). The suite replays these fixtures
  with numpy's SIMD dispatch and ATen's vector kernels turned off to check the claim.
* :class:`Tolerance`: the numbers come out of float kernels (torch, BLAS) that round differently
  per CPU; they are compared to a stated tolerance, per metric family where one needs another.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

from support.paths import DATA  # noqa: F401  (the fixture folder; tests read it as recorded.DATA)


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= rel * max(|a|, |b|) + abs``; ``overrides`` maps metric-name patterns (fnmatch)
    to their own tolerance, first match wins. NaN equals NaN."""

    rel: float
    abs: float
    why: str
    overrides: dict[str, "Tolerance"] = field(default_factory=dict)

    def for_name(self, name: str) -> "Tolerance":
        """The tolerance that applies to the metric called ``name``."""
        return next((t for pattern, t in self.overrides.items() if fnmatch.fnmatchcase(name, pattern)), self)

    def close(self, a: float, b: float) -> bool:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= self.rel * max(abs(a), abs(b)) + self.abs


@dataclass(frozen=True)
class CrossMachineExact:
    """Compared for equality; ``why`` says what makes the numbers the same on every CPU."""

    why: str


_ENV_OUTPUTS = (
    "env outputs: strings, integers and Python floats added in a fixed order; BM25 scores are float32 sums "
    "in posting order (np.add.at, elementwise) and equal scores rank by document index (bm25.top_k), "
    "so no SIMD reduction or sort decides a result"
)

#: Every file under ``tests/data``, with how the tests that read it compare it.
FIXTURES: dict[str, Tolerance | CrossMachineExact] = {
    "trainer_behaviour.json": Tolerance(
        rel=1e-3,
        abs=1e-4,
        why="torch float32 kernels: about 1e-7 apart per operation across CPUs, up to 1e-4 relative after a few Adam "
        "steps (measured with ATEN_CPU_CAPABILITY=default against AVX-512); sampled tokens are compared by digest "
        "and the comparison stops where they branch (tests/reference_trainer/test_trainer_behaviour.py)",
        overrides={
            # the share of items past a clip threshold: an item sitting on the threshold flips with the last bit
            "*clipfrac*": Tolerance(0.0, 0.03, "threshold counts"),
            # the size of float noise itself (sampled vs recomputed log-probs): only its order of magnitude is stable
            "rollout/logp_diff": Tolerance(0.0, 1e-5, "float noise"),
        },
    ),
    "transcripts.json": CrossMachineExact(_ENV_OUTPUTS),
    "sokoban_ragen.json": CrossMachineExact(
        "parsed actions and messages (strings); rewards are multiples of 0.1 "
        "summed in Python, compared with pytest.approx"
    ),
    "searchqa_protocol_cases.json": CrossMachineExact(_ENV_OUTPUTS),
    "webshop_pages_original.json": CrossMachineExact("page texts (strings) of a seeded catalog; " + _ENV_OUTPUTS),
    "webshop_reward_agreement.json": CrossMachineExact(
        "WebShop rewards: Python float arithmetic on fuzzy-match ratios of strings, compared to 1e-9"
    ),
    "webshop_title_nouns.json": CrossMachineExact("lists of words; agreement rates are ratios of integer counts"),
}

#: The test modules that read each fixture: the meta-test re-runs these for the exact ones.
READERS: dict[str, tuple[str, ...]] = {
    "trainer_behaviour.json": ("reference_trainer/test_trainer_behaviour.py",),
    "transcripts.json": ("agentgym_turn/test_registration_transcripts.py",),
    "sokoban_ragen.json": ("agentgym_turn/sokoban/test_ragen.py",),
    "searchqa_protocol_cases.json": ("agentgym_turn/searchqa/test_protocol.py",),
    "webshop_pages_original.json": ("agentgym_turn/webshop/test_pages.py",),
    "webshop_reward_agreement.json": ("agentgym_turn/webshop/test_reward.py", "agentgym_turn/webshop/test_nouns.py"),
    "webshop_title_nouns.json": ("agentgym_turn/webshop/test_reward.py", "agentgym_turn/webshop/test_nouns.py"),
}

#: Numbers recorded inside learning tests (a measured start or gain) are bands, never points: the
#: trajectory of a sampled run is another draw on another CPU, so each band leaves room for it.
BANDS: dict[str, str] = {
    "reference_trainer/recipes/test_sokoban_learning.py": "SFT start >= 60% (measured 75.3%, SFT seed 0); RL gain >= 1 point, interval low above -2; the shuffled control shows no gain and ends >= 1 point below",
    "reference_trainer/recipes/test_webshop_learning.py": "SFT score >= 0.25 (measured 0.30-0.47, SFT seeds 0-2); RL gain >= 3 points, interval above 0; the shuffled control shows no gain and ends >= 3 points below",
    "reference_trainer/recipes/test_searchqa_learning.py": "SFT start >= 12% (measured 16.1% at step 600, the best of an 800-step run; the suite's ceiling is 600); RL exact match interval low above -2; invalid turns fall >= 2 points with the real reward and end >= 2 points below the shuffled control's",
}


def mode(name: str) -> Tolerance | CrossMachineExact:
    """The declared comparison of fixture ``name`` (a file name under ``tests/data``)."""
    return FIXTURES[name]
