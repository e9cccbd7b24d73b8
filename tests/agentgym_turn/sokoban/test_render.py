"""Drawing a Sokoban state (``agentgym_turn/sokoban/render.py``): a kept :class:`GridStyle` draws what drawing every
cell does."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.sokoban.board import board_for, mask_of
from agentgym_turn.sokoban.constants import SYMBOL_SETS
from agentgym_turn.sokoban.generator import generate_level
from agentgym_turn.sokoban.render import GridStyle, grid_rows


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
    for _ in range(3):  # one style, several states: drawing one leaves the next unchanged
        cells = data.draw(st.lists(st.sampled_from(floor), min_size=2, max_size=min(4, len(floor)), unique=True))
        player, box_mask = cells[0], mask_of(cells[1:])
        every_cell = "\n".join(grid_rows(board, box_mask, player, SYMBOL_SETS[symbols], sep, crop_border=crop))
        assert style.text(box_mask, player) == every_cell
