"""Drawing a Sokoban state (``agentgym_turn/sokoban/render.py``): a kept :class:`GridStyle` draws what drawing every
cell does, the first time and when it draws a remembered position again."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.sokoban.board import board_for, mask_of
from agentgym_turn.sokoban.constants import SYMBOL_SETS
from agentgym_turn.sokoban.generator import generate_level
from agentgym_turn.sokoban.render import GRID_MEMO, GridStyle, grid_rows


@given(
    st.integers(0, 10**6),
    st.sampled_from([(6, 6), (7, 9), (10, 10)]),
    st.integers(1, 3),
    st.sampled_from(sorted(SYMBOL_SETS)),
    st.sampled_from(["", " "]),
    st.booleans(),
    st.data(),
)
def test_a_kept_style_draws_any_state_as_drawing_every_cell_does(seed, dim, boxes, symbols, sep, crop, data):
    level = generate_level(np.random.default_rng(seed), dim, boxes if dim != (6, 6) else 1).level
    board = board_for(level)
    style = GridStyle(board, SYMBOL_SETS[symbols], sep, crop)
    floor = [c for c in range(board.n) if board.free[c]]
    drawn = []
    for _ in range(3):  # one style, several states: drawing one leaves the next unchanged
        cells = data.draw(st.lists(st.sampled_from(floor), min_size=2, max_size=min(4, len(floor)), unique=True))
        player, box_mask = cells[0], mask_of(cells[1:])
        every_cell = "\n".join(grid_rows(board, box_mask, player, SYMBOL_SETS[symbols], sep, crop_border=crop))
        assert style.text(box_mask, player) == every_cell
        drawn.append((box_mask, player, every_cell))
    for box_mask, player, every_cell in reversed(drawn):  # remembered
        assert style.text(box_mask, player) == every_cell


def test_a_style_remembers_a_bounded_number_of_positions_and_draws_every_one_right():
    board = board_for(generate_level(np.random.default_rng(7), (10, 10), 2).level)
    style = GridStyle(board, SYMBOL_SETS[sorted(SYMBOL_SETS)[0]])
    floor = [c for c in range(board.n) if board.free[c]]
    states = [(mask_of([a, b]), p) for a in floor for b in floor if a < b for p in floor if p not in (a, b)]
    states = states[: GRID_MEMO + 200]
    assert len(states) > GRID_MEMO  # the memo fills and starts over at least once
    for box_mask, player in states + states[:50]:
        expected = "\n".join(grid_rows(board, box_mask, player, SYMBOL_SETS[sorted(SYMBOL_SETS)[0]]))
        assert style.text(box_mask, player) == expected
        assert len(style._memo) <= GRID_MEMO
