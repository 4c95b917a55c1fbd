"""Host page faults of the step's largest allocations (`whatif.pages`): an op whose new
tensor reaches the edited step's largest allocation size pays fresh pages, one that
leaves it gives them back (hand-made CPU ranks with the fields `lumos convert` writes;
tensor values `[id, storage, offset, numel, itemsize, device]`)."""

from __future__ import annotations

import json

import pytest

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.dims import DimMap, ModelDims, hidden_map
from lumos.simulator.whatif.etset import RankEt
from lumos.simulator.whatif.pages import MIN_KEEP, PAGE_NS, PageTally, allocations, pages
from lumos.simulator.whatif.reshape import reshape_rank
from lumos.simulator.whatif.timing import TraceFit
from tests.simulator.whatif.builders import rank_meta

US = 1_000
MAIN = 100


def _t(tid: int, storage: int, shape: list[int]) -> list[object]:
    numel = 1
    for d in shape:
        numel *= d
    return [tid, storage, 0, numel, 4, "cpu"]


def _op(
    name: str, dur: int, ins: list[tuple[list[int], list[object]]], outs: list[list[object]]
) -> pb.Node:
    n = pb.Node(name=name, type=pb.COMP_NODE)
    n.duration_micros = round(dur / US)
    n.inputs.shapes = json.dumps([s for s, _ in ins], separators=(",", ":"))
    n.inputs.values = json.dumps([v for _, v in ins])
    n.inputs.types = json.dumps(["Tensor(float)"] * len(ins))
    n.outputs.shapes = json.dumps([[int(x) for x in _shape_of(v)] for v in outs])
    n.outputs.values = json.dumps(outs)
    n.attr.extend(
        make_attr(k, v)
        for k, v in (
            (cv.DUR_NS, dur),
            ("is_cpu_op", True),
            (cv.TID, MAIN),
            (cv.CATEGORY, "cpu_op"),
            ("rf_id", 0),
        )
    )
    return n


SHAPES: dict[int, list[int]] = {}


def _shape_of(value: list[object]) -> list[int]:
    return SHAPES[int(value[0])]  # type: ignore[call-overload]


def _tensor(tid: int, storage: int, shape: list[int]) -> list[object]:
    SHAPES[tid] = shape
    return _t(tid, storage, shape)


def _adamw_step(h: int, sqrt_us: int) -> RankEt:
    """B 4, S 64, hidden `h`: the MLP's GELU into a new [B, S, 4h] (the step's largest
    allocation) and AdamW on the [4h, h] weight: `exp_avg_sq.sqrt()` and its
    `/ bias_correction` allocate, `addcdiv_` updates in place."""
    wide = 4 * h
    act, gelu = _tensor(4, 4, [4, 64, wide]), _tensor(5, 5, [4, 64, wide])
    param, sq = _tensor(6, 6, [wide, h]), _tensor(7, 7, [wide, h])
    root, denom = _tensor(8, 8, [wide, h]), _tensor(9, 9, [wide, h])
    nodes = [
        _op("aten::gelu", 250 * US, [([4, 64, wide], act)], [gelu]),
        _op("aten::sqrt", sqrt_us * US, [([wide, h], sq)], [root]),
        _op("aten::div", 13 * US, [([wide, h], root), ([], [])], [denom]),
        _op(
            "aten::addcdiv_",
            40 * US,
            [([wide, h], param), ([wide, h], sq), ([wide, h], denom)],
            [_tensor(11, 6, [wide, h])],
        ),
    ]
    for k, n in enumerate(nodes, start=1):
        n.id = k
        if k > 1:
            n.ctrl_deps.append(k - 1)
    return RankEt(0, rank_meta(0, 1), tuple(nodes))


def _durations(r: RankEt) -> dict[str, int]:
    return {n.name: nd.duration(n) for n in r.nodes}


def _hidden(r: RankEt, h: int, new: int, tally: PageTally | None = None) -> RankEt:
    """`r` with hidden `h` -> `new`, shapes rewritten by value (B·S = H here, a
    coincidence `dims` reads by layout), every op's re-timing ratio 1 (no fitted line)."""
    dmap = DimMap({h: new, 4 * h: 4 * new} if h != new else {})
    return reshape_rank(r, dmap, fit=TraceFit(), tally=tally)


def test_allocations_are_the_new_storages_of_the_outputs() -> None:
    r = _adamw_step(128, 28)
    by = {n.name: allocations(n.inputs, n.outputs) for n in r.nodes}
    assert by["aten::sqrt"] == by["aten::div"] == [512 * 128 * 4]
    assert by["aten::gelu"] == [4 * 64 * 512 * 4]
    assert by["aten::addcdiv_"] == []  # in place: the parameter's own storage


def test_optimizer_temporaries_reaching_the_largest_allocation_pay_fresh_pages() -> None:
    # hidden 128: AdamW's temporaries (256 KiB) are below the MLP's 512 KiB; hidden 256:
    # both are 1 MiB, the temporaries now at the step's largest size (the grid's capture)
    traced = _adamw_step(128, 28)
    tally = PageTally()
    edited = _durations(_hidden(traced, 128, 256, tally))
    before = _durations(traced)
    faults = pages(1 << 20) * PAGE_NS
    assert edited["aten::sqrt"] == before["aten::sqrt"] + faults
    assert edited["aten::div"] == before["aten::div"] + faults
    for op in ("aten::gelu", "aten::addcdiv_"):  # at it before and after, or in place
        assert edited[op] == before[op]
    assert (tally.gained, tally.lost, tally.gained_ns) == (2, 0, 2 * faults)
    assert tally.old_largest == 512 << 10 and tally.new_largest == 1 << 20
    assert "2 ops now allocate at it" in tally.note()


def test_temporaries_leaving_the_largest_allocation_give_their_pages_back() -> None:
    # the other way: at hidden 256 the 1 MiB sqrt paid fresh pages (440-570 us measured)
    traced = _adamw_step(256, 500)
    tally = PageTally()
    edited = _durations(_hidden(traced, 256, 128, tally))
    assert edited["aten::sqrt"] == 500 * US - pages(1 << 20) * PAGE_NS
    assert edited["aten::div"] == round(MIN_KEEP * 13 * US)  # it had not paid them: kept
    assert edited["aten::gelu"] == 250 * US
    assert (tally.gained, tally.lost) == (0, 2)


def test_steps_whose_allocations_stay_under_the_initial_mmap_threshold_are_left() -> None:
    # hidden 8 -> 16: every tensor is under 128 KiB, glibc's threshold never moves
    traced = _adamw_step(8, 28)
    tally = PageTally()
    assert _durations(_hidden(traced, 8, 16, tally)) == _durations(traced)
    assert tally.note() == ""


def test_gpu_trace_has_no_host_page_model() -> None:
    traced = _adamw_step(128, 28)
    kernel = pb.Node(id=99, name="vectorized_elementwise_kernel", type=pb.COMP_NODE)
    kernel.attr.extend([make_attr(cv.DUR_NS, 5 * US), make_attr(cv.STREAM, 7)])
    gpu = RankEt(0, traced.metadata, (*traced.nodes, kernel))
    tally = PageTally()
    edited = _durations(_hidden(gpu, 128, 256, tally))
    assert edited["aten::sqrt"] == 28 * US
    assert tally == PageTally()


@pytest.mark.parametrize("h", [128, 256])
def test_edit_to_the_same_hidden_size_changes_nothing(h: int) -> None:
    traced = _adamw_step(h, 28)
    assert _durations(_hidden(traced, h, h)) == _durations(traced)


def test_weight_gradient_gemm_leaves_the_largest_allocation_when_tokens_equal_hidden() -> None:
    # hidden 256 -> 128 at B·S = 256 = H: the FC weight's gradient `mm` into [4H, H]
    # (1 MiB, the largest with the MLP activation) has an ambiguous [1024, 256] output; it
    # follows its rewritten operands to [512, 128] (256 KiB: below the new 512 KiB)
    g, x = _tensor(20, 20, [1024, 256]), _tensor(21, 21, [256, 256])
    mm = _op(
        "aten::mm", 1_500 * US, [([1024, 256], g), ([256, 256], x)], [_tensor(22, 22, [1024, 256])]
    )
    act = _tensor(23, 23, [4, 64, 1024])
    gelu = _op("aten::gelu", 250 * US, [([4, 64, 1024], act)], [_tensor(24, 24, [4, 64, 1024])])
    for k, n in enumerate((gelu, mm), start=1):
        n.id = k
    traced = RankEt(0, rank_meta(0, 1), (gelu, mm))
    tally = PageTally()
    dims = ModelDims(batch=4, seq=64, hidden=256, heads=4)
    edited = reshape_rank(traced, hidden_map(dims, 128), fit=TraceFit(), tally=tally)
    assert json.loads(edited.nodes[1].outputs.shapes) == [[512, 128]]
    assert json.loads(edited.nodes[0].outputs.shapes) == [[4, 64, 512]]
    assert (tally.gained, tally.lost) == (0, 1)
    assert nd.duration(edited.nodes[1]) == 1_500 * US - pages(1 << 20) * PAGE_NS
