"""``webshop_dialog_v0``, PettingZoo style: ``env()`` (AEC, order-enforced), ``raw_env`` and
``parallel_env()`` (one move per parallel step: only the agent whose turn it is acts, the other's
action is ignored; PettingZoo's ``turn_based_aec_to_parallel``).

```python
from agentgym_turn.multiagent import webshop_dialog_v0
env = webshop_dialog_v0.env(render_mode="ansi", goal_split="test")
```
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils import wrappers
from pettingzoo.utils.conversions import turn_based_aec_to_parallel

from .webshop_dialog import WebShopDialogEnv

raw_env = WebShopDialogEnv


def env(**kwargs: Any):
    """The AEC env wrapped in PettingZoo's ``OrderEnforcingWrapper`` (keywords: :class:`WebShopDialogEnv`)."""
    return wrappers.OrderEnforcingWrapper(WebShopDialogEnv(**kwargs))


def parallel_env(**kwargs: Any):
    """The parallel view: each ``step(actions)`` plays ``actions[active agent]`` (``info["active_agent"]``)."""
    return turn_based_aec_to_parallel(env(**kwargs))
