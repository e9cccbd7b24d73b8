"""The reference Sokoban (``tests/support/sokoban_reference.py``) on cases worked out by hand."""

from __future__ import annotations

import pytest

from support.sokoban_reference import ref_move, ref_parse, ref_shortest


def test_reference__pushes_and_rewards_by_hand():
    level = ref_parse("#######\n#@$ . #\n#######")
    boxes, player = level.boxes, level.player
    boxes, player, r1 = ref_move(level, boxes, player, "Left")  # wall
    boxes, player, r2 = ref_move(level, boxes, player, "Right")  # push
    boxes, player, r3 = ref_move(level, boxes, player, "Right")  # push onto the target: solved
    assert (r1, r2, r3) == (-1, -1, 109) and player == (1, 3) and boxes == {(1, 4)}


def test_reference__cannot_push_two_boxes_or_into_walls():
    level = ref_parse("#######\n#@$$. #\n#######")
    assert ref_move(level, level.boxes, level.player, "Right") == (level.boxes, level.player, -1)
    assert ref_shortest(level) is None


@pytest.mark.parametrize("text, moves", [("#####\n#@$.#\n#####", 1), ("######\n#    #\n# $@.#\n#    #\n######", 6)])
def test_reference__shortest_by_hand(text, moves):
    assert ref_shortest(ref_parse(text)) == moves
