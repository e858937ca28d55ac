"""The page reads a side's worker makes before a handed-over call's start event: one byte of
every stride of the placement's arena, and nothing where the judge asked for none."""

from __future__ import annotations

import torch

from kbench_ci.side import serve


def _case(stride: int) -> serve._Case:
    return serve._Case(kernel=None, device=torch.device("cpu"), timer=None, num_warmup=0, touch_stride=stride)  # type: ignore[arg-type]


def test_the_reads_take_one_byte_of_every_stride_of_the_arena() -> None:
    case = _case(4096)
    arena = torch.zeros(5 * 4096 + 100, dtype=torch.uint8)
    arena[::4096] = 1  # the bytes the reads must reach: 6 of them, the last in a partial stride
    arena[1::4096] = 100  # and bytes they must not
    case.pages[0] = arena[:: case.touch_stride]
    case.page_copies[0] = torch.full((6,), 7, dtype=torch.uint8)
    serve._touch_pages(case, 0)
    assert case.page_copies[0].tolist() == [1] * 6


def test_no_reads_where_the_judge_asks_for_none_or_the_placement_has_none() -> None:
    case = _case(0)
    serve._touch_pages(case, 0)  # no pages, nothing to copy into: nothing to do, and no error
    assert not case.page_copies and not case.pages
