"""An independent, deliberately plain Sokoban: the oracle the other Sokoban tests compare to.

It shares no code with ``agentgym_turn.sokoban``: its own text parser, its own move rule
(gym-sokoban's, written from the rules), its own reward constants and a brute-force
breadth-first search over (player, boxes) states with no pruning at all.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


DELTAS = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}

# gym-sokoban, SokobanEnv.__init__: penalty_for_step, reward_box_on_target,
# penalty_box_off_target, reward_finished; in tenths.
STEP, ON, OFF, DONE = -1, 10, -10, 100


@dataclass(frozen=True)
class RefLevel:
    walls: frozenset
    targets: frozenset
    boxes: frozenset
    player: tuple
    rows: int
    cols: int

    def is_wall(self, rc) -> bool:
        r, c = rc
        return not (0 <= r < self.rows and 0 <= c < self.cols) or rc in self.walls


def ref_parse(text: str) -> RefLevel:
    """Boxoban/XSB symbols: # wall, space floor, . target, $ box, * box on target, @ player, + player on target."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    walls, targets, boxes, player = set(), set(), set(), None
    for r, line in enumerate(lines):
        for c, ch in enumerate(line):
            if ch == "#":
                walls.add((r, c))
            if ch in ".*+":
                targets.add((r, c))
            if ch in "$*":
                boxes.add((r, c))
            if ch in "@+":
                player = (r, c)
    return RefLevel(frozenset(walls), frozenset(targets), frozenset(boxes), player, len(lines), max(map(len, lines)))


def ref_move(level: RefLevel, boxes: frozenset, player: tuple, move: str) -> tuple[frozenset, tuple, int]:
    """One move: (boxes, player, reward in tenths)."""
    dr, dc = DELTAS[move]
    nxt = (player[0] + dr, player[1] + dc)
    if level.is_wall(nxt):
        return boxes, player, STEP
    if nxt not in boxes:
        return boxes, nxt, STEP
    beyond = (nxt[0] + dr, nxt[1] + dc)
    if level.is_wall(beyond) or beyond in boxes:
        return boxes, player, STEP
    new = (boxes - {nxt}) | {beyond}
    reward = STEP
    if beyond in level.targets and nxt not in level.targets:
        reward += ON
    if nxt in level.targets and beyond not in level.targets:
        reward += OFF
    if new <= level.targets:
        reward += DONE
    return frozenset(new), nxt, reward


def ref_shortest(level: RefLevel, max_states: int = 3_000_000) -> int | None:
    """Fewest moves to put every box on a target, by plain breadth-first search (None: unsolvable)."""
    start = (level.boxes, level.player)
    if level.boxes <= level.targets:
        return 0
    seen = {start}
    queue = deque([(level.boxes, level.player, 0)])
    while queue:
        boxes, player, d = queue.popleft()
        for move in DELTAS:
            nb, npl, _ = ref_move(level, boxes, player, move)
            if (nb, npl) in seen:
                continue
            if nb <= level.targets:
                return d + 1
            seen.add((nb, npl))
            if len(seen) > max_states:
                raise RuntimeError("state space too large for brute force")
            queue.append((nb, npl, d + 1))
    return None
