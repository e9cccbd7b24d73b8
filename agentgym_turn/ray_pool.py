"""Envs held by Ray actors across a cluster, stepped as one batch (the optional ``ray`` extra): the face of
:mod:`agentgym_turn.pools.ray_actors`, where :class:`RayEnvPool` keeps the env-pool protocol beside the other pools."""

from .pools.ray_actors import RayEnvPool, infra_turn

__all__ = ["RayEnvPool", "infra_turn"]
