"""`simulate()`: the one entry point — ETs (or graphs) and options in, a `SimResult` out.

Modes: `replay` uses recorded durations for everything (a collective takes its recorded
time without the wait for late peers: `comm_dur_ns`, else the shortest member duration);
`model` keeps recorded compute and prices communication with a `CollectivePricer`;
`astra` reproduces ASTRA-sim: `duration_micros` compute, network-priced collectives,
and its per-rank one-CPU / one-GPU / one-comm resource rule with ascending-id issue.
Everything is validated before the first event; the run never hangs (a stall is a
SimulationError naming the stuck nodes).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.rankset import check_rank_set
from lumos.errors import ConfigError, SimulationError, ValidationError
from lumos.progress import report
from lumos.simulator.align import Alignment, align_ranks
from lumos.simulator.assemble import RankMeta, assemble
from lumos.simulator.backlog import holds
from lumos.simulator.comm_cost import ASTRA_PRICED, CommCoster
from lumos.simulator.fold import Folding, find_folding, identity
from lumos.simulator.graph import SEND, RankGraph
from lumos.simulator.graph_checks import (
    cut_short_notes,
    cycle_problems,
    overlong_notes,
    version_notes,
)
from lumos.simulator.heap import trim
from lumos.simulator.load import load_graphs
from lumos.simulator.network.api import CollectivePricer
from lumos.simulator.plan import Plan, build_plan, empty_plan, hold_first_ops
from lumos.simulator.processors import assign_processors
from lumos.simulator.provenance import check_durations, durations, pricing_notes
from lumos.simulator.rendezvous import Instance, match_collectives, match_p2p, outside_notes
from lumos.simulator.result import ProcessorInfo, SimResult
from lumos.simulator.scheduler import Schedule, run_plan
from lumos.simulator.step_end import StepTail, step_tail
from lumos.simulator.sync import RuntimeSync

if TYPE_CHECKING:  # the cost model (and the hardware data) load only when used
    from lumos.simulator.costmodel.roofline import CostModel

MAX_STUCK_LISTED = 10
log = logging.getLogger(__name__)


class Mode(str, Enum):
    REPLAY = "replay"
    MODEL = "model"
    ASTRA = "astra"


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How to simulate.

    `pricer` prices communication (required for model and astra; in replay it prices
    only collectives with no recorded time). `fold`: simulate one of each set of identical
    ranks (exact; see `lumos.simulator.fold`); `fold_keys`: per rank, what else must be
    equal for ranks to fold (what a placement-aware pricer charges them). `ablate_sync`:
    drop cross-stream and GPU→CPU edges and runtime syncs (the dPRO-like graph, for ablations). `comm_groups`:
    ASTRA-sim comm-group mapping `{pg_name: [ranks]}`. `repair`: load
    broken foreign ETs anyway — drop dependencies on absent ids, and in a graph with a
    cycle, dependencies on later ids (see `load.load_graphs`) — instead of failing.
    `align_ranks`: start each rank when it started the measured step (`step_start_ns`,
    see `lumos.simulator.align`); None = in replay mode only; never in astra mode.
    `cost_model` prices compute with no measured duration (`dur_estimated`, or no
    duration but `num_ops`/`tensor_size`; see `lumos.simulator.costmodel.estimate`): always in
    model mode, in replay mode only with `estimate_missing`. `timelines`: keep every
    node's simulated times and the graphs in the result (the critical path, timelines
    and plots walk them); without, the graphs are released before the event loop and
    each rank keeps its step times and breakdown (~165 instead of ~245 bytes a node for
    the whole run: `docs/speed.md`). `ranks`: simulate only these ranks of the trace
    (`rendezvous.outside_notes` states what that means for communication).
    `allow_partial`: a trace given as a path may miss ranks of its set (it is refused
    otherwise, as the CLI refuses it without --allow-partial); files of different runs or
    mislabelled ranks are refused either way (`converters.chakra.rankset`).
    `relative_holds`: a stream's first op that the trace shows held past its launch
    waits its hold after the moment it can start, capped at its recorded start, instead
    of its stream being busy until that start (`lumos.simulator.backlog`); the what-if
    pipeline's choice, so an edit that runs the op's dependencies earlier moves it.
    """

    mode: Mode = Mode.REPLAY
    pricer: CollectivePricer | None = None
    fold: bool = False
    fold_keys: Mapping[int, bytes] | None = None
    ablate_sync: bool = False
    comm_groups: Mapping[str, Sequence[int]] | None = None
    repair: bool = False
    align_ranks: bool | None = None
    cost_model: CostModel | None = None
    estimate_missing: bool = False
    timelines: bool = True
    ranks: frozenset[int] | None = None
    relative_holds: bool = False
    allow_partial: bool = False


def simulate(
    source: str | Path | Sequence[RankGraph],
    options: SimOptions | None = None,
    *,
    checked: Sequence[str] | None = None,
) -> SimResult:
    """Simulate all ranks of a trace (path to ETs, or already-built graphs).

    `checked`: the problems `rankset.check_rank_set` excused when the caller already
    checked a path's rank set (`lumos.api.simulate`: before its configs); None: checked here.

    Raises ValidationError (cycles, mismatched collectives, unpaired send/recv),
    RankSetError (a path whose files are not one whole set; see `allow_partial`),
    ConfigError (model/astra mode without a pricer), SimulationError (a stall).
    """
    opts = options or SimOptions()
    mode = Mode(opts.mode)
    if mode is not Mode.REPLAY and opts.pricer is None:
        raise ConfigError(f"mode {mode.value!r} needs a network pricer (--hw or ASTRA-sim configs)")
    with _gc_paused():
        return _simulate(source, opts, mode, checked)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (restored on exit): a run allocates
    hundreds of thousands of objects, none of them cyclic garbage worth hunting mid-run,
    and each collection would walk them all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(slots=True)
class _Prepared:
    """A run ready for the event loop: the plan and what the result needs of the graphs
    (the graphs themselves only when the result keeps timelines)."""

    plan: Plan
    sync: RuntimeSync | None
    metas: list[RankMeta]
    sim_metas: list[RankMeta]
    processors: list[list[ProcessorInfo]]
    tails: list[StepTail | None]
    folding: Folding
    alignment: Alignment
    free: dict[int, dict[int, int]]
    graphs: list[RankGraph] | None
    notes: list[str]
    t_load: float


def _simulate(
    source: str | Path | Sequence[RankGraph],
    opts: SimOptions,
    mode: Mode,
    checked: Sequence[str] | None,
) -> SimResult:
    t0 = time.perf_counter()
    p = _prepare(source, opts, mode, checked)  # without timelines, the graphs are gone on return
    if p.graphs is None:
        trim()
    plan = p.plan
    n, n_total = plan.n, sum(len(m.ids) for m in p.metas)
    t_plan = time.perf_counter()
    report("simulate", 0, n, "nodes")
    schedule = run_plan(plan, p.sync)
    t_run = time.perf_counter()
    report("simulate", n, n, "nodes")
    _check_complete(schedule, plan, p.sim_metas)
    result = assemble(
        p.metas, p.sim_metas, p.processors, p.tails, plan, schedule, p.folding, mode.value,
        p.free, p.graphs,
    )  # fmt: skip
    result.aligned, result.align_note = p.alignment.aligned, p.alignment.reason
    result.notes = p.notes
    result.stats = {
        "nodes_simulated": n,
        "nodes_total": n_total,
        "ranks_simulated": len(p.sim_metas),
        "events": schedule.events,
        "load_s": round(p.t_load - t0, 4),
        "plan_s": round(t_plan - p.t_load, 4),
        "run_s": round(t_run - t_plan, 4),
        "fold_note": p.folding.reason,
    }
    log.info(
        "%s: %d rank(s) (%d simulated), %d nodes, %d events; load %.2f s, plan %.2f s, run %.2f s",
        mode.value,
        len(p.metas),
        len(p.sim_metas),
        n,
        schedule.events,
        p.t_load - t0,
        t_plan - p.t_load,
        t_run - t_plan,
    )
    return result


def _prepare(
    source: str | Path | Sequence[RankGraph],
    opts: SimOptions,
    mode: Mode,
    checked: Sequence[str] | None,
) -> _Prepared:
    """Load (or take) the graphs, validate and match them, and build the plan."""
    partial: list[str] | None = None  # None: graphs given, no files read
    if isinstance(source, (str, Path)):
        if checked is None:
            sources = find_et_sources(source)
            checked = check_rank_set(sources, allow_partial=opts.allow_partial, ranks=opts.ranks)
        partial = list(checked)
        graphs = load_graphs(source, opts.comm_groups, opts.repair, opts.ranks)
    else:
        graphs = list(source)
    if mode is Mode.ASTRA and isinstance(source, (str, Path)):
        from lumos.simulator.network.binary_rules import check_binary_rules

        check_binary_rules(source, opts.pricer, opts.comm_groups)
    notes = [f"simulated a partial set: {p}" for p in partial or []]
    notes += outside_notes(graphs) if opts.ranks is not None else []
    cut = [n for g in graphs for n in cut_short_notes(g)]
    if cut:
        log.warning("%d rank file(s) look cut short: %s", len(cut), "; ".join(cut))
    # about the files read (a what-if's edited graphs carry a step no one measured)
    odd = [] if partial is None else version_notes(graphs)
    odd += [] if partial is None else [n for g in graphs for n in overlong_notes(g)]
    for note in odd:
        log.warning("%s", note)
    notes += cut + odd
    graphs = _estimate(graphs, mode, opts, notes)
    t_load = time.perf_counter()
    problems = [p for g in graphs for p in cycle_problems(g)]
    align = opts.align_ranks if opts.align_ranks is not None else mode is Mode.REPLAY
    alignment = align_ranks(graphs, align and mode is not Mode.ASTRA)
    folding = (
        find_folding(graphs, alignment.offsets, opts.fold_keys) if opts.fold else identity(graphs)
    )
    by_rank = {g.rank: g for g in graphs}
    sim_graphs = [by_rank[r] for r in folding.simulated]
    # astra mode: collectives ASTRA-sim does not simulate wait their own duration on
    # each rank, unsynchronised (as the binary replays them), so they form no instance
    types = ASTRA_PRICED if mode is Mode.ASTRA else None
    instances = match_collectives(sim_graphs, problems, types) + match_p2p(
        sim_graphs, folding.rep, problems
    )
    if problems:
        raise ValidationError(problems, header="the trace cannot be simulated")
    astra = mode is Mode.ASTRA
    assignments = [assign_processors(g, astra) for g in sim_graphs]
    held = [[] if astra else holds(g, a) for g, a in zip(sim_graphs, assignments, strict=True)]
    free = {k: {h.proc: h.start_ns for h in hk} for k, hk in enumerate(held) if hk}
    tails = [
        None if astra else step_tail(g, a) for g, a in zip(sim_graphs, assignments, strict=True)
    ]
    metas = {g.rank: RankMeta.of(g) for g in graphs}
    plan = empty_plan(sim_graphs, assignments, astra)
    plan.slot_start = [alignment.offset(g.rank) for g in sim_graphs]
    clock = [int(g.step_start_ns or 0) for g in sim_graphs] if alignment.aligned else None
    priced, p2p = _attach_comms(plan, sim_graphs, instances, mode, opts.pricer, clock)
    gpu = opts.cost_model.gpu.name if opts.cost_model is not None else None
    notes += pricing_notes(mode.value, priced, 0, gpu)
    processors = [a.processors for a in assignments]
    kept = graphs if opts.timelines else None
    del graphs, by_rank  # without timelines, filling the plan is the graphs' last use
    build_plan(plan, sim_graphs, assignments, astra, opts.ablate_sync, release=kept is None)
    for k, hk in enumerate(held):
        hold_first_ops(plan, k, hk, opts.relative_holds)
    for v, ns in p2p:
        plan.dur[v] = ns
    tracked = plan.sync_args or plan.early_wait
    sync = RuntimeSync(len(plan.unlimited), plan.stream_of) if tracked else None
    return _Prepared(
        plan=plan,
        sync=sync,
        metas=list(metas.values()),
        sim_metas=[metas[r] for r in folding.simulated],
        processors=processors,
        tails=tails,
        folding=folding,
        alignment=alignment,
        free=free,
        graphs=kept,
        notes=notes,
        t_load=t_load,
    )


def _estimate(
    graphs: list[RankGraph], mode: Mode, opts: SimOptions, notes: list[str]
) -> list[RankGraph]:
    """Graphs with cost-model durations where the ETs recorded none (model mode, or
    replay with `estimate_missing`); adds to `notes` what was estimated or left at 0.

    Raises ConfigError when no cost model is given, SimulationError when a replay
    would be made of nothing but missing durations (see `provenance.check_durations`).
    """
    if mode is Mode.ASTRA:
        return graphs
    if mode is Mode.REPLAY and not opts.estimate_missing:
        notes += check_durations(graphs)
        return graphs
    from lumos.simulator.costmodel.estimate import estimate_graph, needs_estimates

    todo = [g for g in graphs if needs_estimates(g)]
    if not todo:
        return graphs
    if opts.cost_model is None:
        raise ConfigError(
            f"rank {todo[0].rank}: compute nodes carry no measured duration (dur_estimated, "
            "e.g. converted from a host ET alone); pricing them needs --hw with a GPU that has "
            "a compute calibration (hwconfigs/calibration_tables/)"
        )
    estimated = sum(durations(g).missing for g in todo)
    notes += pricing_notes("", 0, estimated, opts.cost_model.gpu.name)
    return [estimate_graph(g, opts.cost_model) if needs_estimates(g) else g for g in graphs]


def _attach_comms(
    plan: Plan,
    graphs: Sequence[RankGraph],
    instances: list[Instance],
    mode: Mode,
    pricer: CollectivePricer | None,
    clock: Sequence[int] | None = None,
) -> tuple[int, list[tuple[int, int]]]:
    """Give each joint event its members (global indices), its transfer time and, where
    members leave at different times, each one's exit; price unpaired sends (peer not
    loaded) outside replay. `clock`: each graph's absolute step start, when shared.
    Returns how many events the pricer timed, and the unpaired sends' (global node,
    duration) for the plan's `dur`."""
    coster = CommCoster(graphs, mode.value, pricer, clock)
    members = [inst.members for inst in instances]
    counts = np.fromiter(map(len, members), np.int64, len(members))
    pairs = np.fromiter(chain.from_iterable(chain.from_iterable(members)), np.int64)
    base = np.asarray(plan.offsets, np.int64)
    nodes = base[pairs[0::2]] + pairs[1::2]
    plan.match[nodes] = np.repeat(np.arange(len(instances), dtype=np.int64), counts)
    node_list = nodes.tolist()
    ptr = np.concatenate(([0], np.cumsum(counts))).tolist()
    plan.inst_members = list(map(node_list.__getitem__, map(slice, ptr[:-1], ptr[1:])))
    plan.inst_dur = list(map(coster.instance_ns, instances))
    if clock is not None:
        plan.inst_exit = list(map(coster.member_exits, instances))
    finish = getattr(pricer, "member_finish", None)
    if mode is Mode.ASTRA and finish is not None:
        plan.inst_finish = [
            finish(inst.comm_type, inst.size, inst.group)
            if inst.kind == "coll" and len(inst.members) == len(inst.group)
            else None
            for inst in instances
        ]
    unpaired: list[tuple[int, int]] = []
    if mode is Mode.REPLAY or pricer is None:
        return coster.priced, unpaired
    for k, g in enumerate(graphs):
        for i in np.nonzero(g.type == SEND)[0].tolist():
            if plan.match[plan.offsets[k] + i] < 0:
                size, peer = int(g.comm_size[i]), int(g.comm_peer[i])
                unpaired.append((plan.offsets[k] + i, pricer.p2p_ns(size, g.rank, peer)))
                coster.priced += 1
    return coster.priced, unpaired


def _check_complete(schedule: Schedule, plan: Plan, graphs: Sequence[RankMeta]) -> None:
    stuck = np.flatnonzero(schedule.end < 0).tolist()
    if not stuck:
        return
    lines = []
    for v in stuck[:MAX_STUCK_LISTED]:
        k = int(np.searchsorted(plan.offsets, v, side="right")) - 1
        g = graphs[k]
        state = "started, waiting" if schedule.start[v] >= 0 else "never started"
        lines.append(f"{g.where(v - plan.offsets[k])} ({state})")
    raise SimulationError(
        f"simulation stalled with {len(stuck)} node(s) unfinished "
        "(a runtime dependency cycle across streams or ranks):\n  " + "\n  ".join(lines)
    )
