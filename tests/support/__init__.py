"""What the tests share: toy envs, servers' clients, reference implementations, paths.

``tests/`` is on ``sys.path`` (pyproject's ``pythonpath``, and ``tests/conftest.py`` for the processes
the tests start): ``from support import trainer_envs``.
"""
