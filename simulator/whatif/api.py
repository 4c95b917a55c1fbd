"""The what-if pipeline: recover the structure, apply the asked edits in a fixed order,
simulate base and edited steps side by side.

`WhatIf` names the edits; `run_whatif` returns both simulations, the structure found, the
edited ETs and what each edit did. Edits apply in the order layers, hidden/FFN,
sequence, tensor parallel, data parallel, pipeline, hardware, faults; each is a pure function of tagged
ETs (`recover` tags them first, or keeps the tags of an already edited set), so the
order only matters where it should (the pipeline is cut from the resized replicas).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.result import SimResult
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.checks import check_edits
from lumos.simulator.whatif.contention import recontend
from lumos.simulator.whatif.dims import ModelDims, hidden_map, infer_dims, seq_map
from lumos.simulator.whatif.dp import dp_degree, set_dp
from lumos.simulator.whatif.etset import EtSet, load_etset, rank_files, simulate_etset
from lumos.simulator.whatif.faults import jitter, slow_link, slow_rank
from lumos.simulator.whatif.groups import GroupRole, group_roles, roles_by_members
from lumos.simulator.whatif.layers import set_layers
from lumos.simulator.whatif.netfit import fit_network
from lumos.simulator.whatif.nodes import DurationOverflowError
from lumos.simulator.whatif.normalise import Normalised, normalise_step
from lumos.simulator.whatif.pages import PageTally
from lumos.simulator.whatif.reshape import remember_fit, reshape
from lumos.simulator.whatif.structure import RankStructure, recover_rank, tag
from lumos.simulator.whatif.tails import keep_tails

#: the system whose GPU prices kernel re-timing when the trace's is not named (--base-hw)
DEFAULT_GPU_SYSTEM = "h100"


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The edits to apply (None / empty: leave as traced)."""

    layers: int | None = None
    hidden: int | None = None
    ffn: int | None = None
    seq: int | None = None
    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    schedule: str = "1f1b"
    vp: int = 1
    microbatches: int | None = None
    hw: str | None = None
    base_hw: str | None = None
    slow_ranks: tuple[tuple[int, float], ...] = ()
    slow_links: tuple[tuple[int, float], ...] = ()
    jitter: float = 0.0
    seed: int = 0
    #: start from the normalised step (`normalise.normalise_step`), not the step as traced
    normalise: bool = True


@dataclass(slots=True)
class Recovered:
    """A tagged trace with what recovery found on each rank and for each group."""

    ets: EtSet
    structures: list[RankStructure]
    roles: list[GroupRole]
    dims: ModelDims | None
    normalised: Normalised = field(default_factory=Normalised)


@dataclass(slots=True)
class WhatIfResult:
    """Base and predicted simulations, the structure, the edited ETs, per-edit notes."""

    base: SimResult
    predicted: SimResult
    recovered: Recovered
    edited: EtSet
    notes: list[str] = field(default_factory=list)


def _tagged(ets: EtSet) -> bool:
    return all(nd.attr(n, "phase") is not None for r in ets.ranks for n in r.nodes)


def recover(ets: EtSet, normalise: bool = True) -> Recovered:
    """Tag every node with phase/layer/micro-batch (kept when already tagged).

    A traced step (not yet tagged) is first normalised (`normalise.normalise_step`: waits
    anchored on what they waited for, preempted ops trimmed) unless `normalise` is off.
    """
    normalised = Normalised()
    if normalise and not _tagged(ets):
        ets, normalised = normalise_step(ets)
    structures = [recover_rank(r) for r in ets.ranks]
    tagged = ets if _tagged(ets) else tag(ets, structures)
    tagged = EtSet(tuple(remember_fit(r) for r in tagged.ranks), tagged.source)
    dims = infer_dims(tagged.ranks[0].nodes) if tagged.ranks else None
    return Recovered(tagged, structures, group_roles(tagged), dims, normalised)


def _activation_roles(ets: EtSet) -> set[tuple[int, ...]]:
    return {m for m, role in roles_by_members(ets).items() if role in ("tp", "pp", "cp")}


def apply_edits(rec: Recovered, spec: WhatIf) -> tuple[EtSet, list[str]]:
    """The edited trace and one note per edit. Raises ConfigError for an impossible edit,
    ResourceLimitError for one past a limit (`checks.check_edits`)."""
    check_edits(rec, spec)
    ets, notes, dims = rec.ets, [], rec.dims
    model = _cost_model(ets, spec)
    if spec.layers is not None:
        ets = set_layers(ets, spec.layers)
        notes.append(f"layers: {rec.structures[0].layers} -> {spec.layers}")
    resized = spec.hidden is not None or spec.ffn is not None or spec.seq is not None
    if resized and dims is None:
        raise ConfigError("cannot read batch/sequence/hidden sizes from the trace's layers")
    if spec.hidden is not None or spec.ffn is not None:
        assert dims is not None
        hidden = spec.hidden or dims.hidden
        act = _activation_roles(ets)
        ratio = hidden / dims.hidden
        tally = PageTally()
        scale = _comm_scale(ets, act, ratio, ratio**2)
        kept: dict[int, int] = {}
        ets = reshape(ets, hidden_map(dims, hidden, spec.ffn), scale, tally=tally, vocab=kept)
        notes.append(
            f"hidden: {dims.hidden} -> {hidden}" + (f", FFN -> {spec.ffn}" if spec.ffn else "")
        )
        notes += [tally.note()] if tally.note() else []
        notes.append(_vocab_note(kept[ets.ranks[0].rank]))
    if spec.seq is not None:
        assert dims is not None
        act = _activation_roles(ets)
        scale = _comm_scale(ets, act, spec.seq / dims.seq, 1.0)
        tally = PageTally()
        ets = reshape(ets, seq_map(dims, spec.seq), scale, model, tally)
        notes.append(f"sequence: {dims.seq} -> {spec.seq}")
        notes += [tally.note()] if tally.note() else []
    if spec.tp is not None:
        from lumos.simulator.whatif.tp import set_tp, tp_degree

        before = tp_degree(ets)
        ets = set_tp(ets, spec.tp, dims, model)
        notes.append(f"tensor parallel: {before} -> {spec.tp}")
    if spec.layers is not None or spec.hidden is not None or spec.ffn is not None or spec.tp:
        ets = _rebucket(rec, ets, spec, notes)
    if spec.dp is not None:
        unfitted = spec.dp > dp_degree(ets) and not fit_network(ets).groups
        ets = set_dp(ets, spec.dp)
        notes.append(
            f"data parallel: -> {spec.dp}"
            + (
                "; the trace has no collective between two ranks to fit the network on: "
                "the new replicas' transfers cost nothing here (trace two ranks or more)"
                if unfitted
                else ""
            )
        )
    if spec.pp is not None:
        from lumos.simulator.whatif.pp import set_pp

        ets = set_pp(ets, spec.pp, spec.schedule, spec.vp, spec.microbatches, dims)
        notes.append(
            f"pipeline: {spec.pp} stages, {spec.schedule}"
            + (f" vp {spec.vp}" if spec.schedule == "interleaved" else "")
            + f", {spec.microbatches or spec.pp} micro-batches"
        )
    if spec.hw is not None:
        ets = _swap_hw(ets, spec, notes)
    for rank, factor in spec.slow_ranks:
        ets = slow_rank(ets, rank, factor)
        notes.append(f"rank {rank} compute x{factor}")
    for rank, factor in spec.slow_links:
        ets = slow_link(ets, rank, factor)
        notes.append(f"rank {rank} links x{factor}")
    if spec.jitter:
        ets = jitter(ets, spec.jitter, spec.seed)
        notes.append(f"kernel jitter sigma {spec.jitter} (seed {spec.seed})")
    return contended(rec, ets), notes


def contended(rec: Recovered, ets: EtSet) -> EtSet:
    """`ets` (edited from `rec`) with the traced tails and the traced step's host
    contention (`contention.recontend`: the expected lost slices, none when inactive)."""
    ets = keep_tails(rec.ets, ets)
    if not rec.normalised.contention.active:
        return ets
    return keep_tails(rec.ets, recontend(ets, rec.normalised.contention))


def _vocab_note(size: int) -> str:
    """What a hidden edit left alone: the vocabulary `size` its head and token table have
    (0: none found), which a size-based rewrite would take for a hidden size it equals."""
    if size <= 0:
        return "vocabulary: no LM head found before a loss; tensors rewritten by size"
    return f"vocabulary: {size} kept on the token table, the head, their gradients and the logits"


def _rebucket(rec: Recovered, ets: EtSet, spec: WhatIf, notes: list[str]) -> EtSet:
    """DDP's gradient buckets re-formed for the edited parameters (`rebucket`)."""
    from lumos.simulator.whatif.rebucket import rebucket, tp_share

    share = None
    if spec.tp is not None and rec.dims is not None:
        hidden = spec.hidden or rec.dims.hidden
        traced = int(get_attr(ets.ranks[0].metadata, cv.META_WHATIF_SHAPES_TP, 1) or 1)
        share = tp_share(hidden, spec.ffn or 4 * hidden, traced, spec.tp)
    ets, note = rebucket(rec.ets, ets, share)
    if note:
        notes.append(note)
    return ets


def _cost_model(ets: EtSet, spec: WhatIf) -> CostModel | None:
    """The traced GPU's cost model (for re-timing kernels), or None on a CPU-only trace."""
    if not any(nd.on_gpu(n) for r in ets.ranks for n in r.nodes):
        return None
    from lumos.hwconfigs.load import load_system

    return CostModel.for_gpu(load_system(spec.base_hw or DEFAULT_GPU_SYSTEM).gpu)


def _comm_scale(ets: EtSet, act: set[tuple[int, ...]], act_factor: float, grad_factor: float):  # type: ignore[no-untyped-def]
    from lumos.simulator.whatif.etset import process_groups
    from lumos.simulator.whatif.groups import members_of

    groups, world = process_groups(ets), ets.world_size

    def scale(n: pb.Node) -> float:
        if n.type != pb.COMM_COLL_NODE:
            return act_factor
        return act_factor if members_of(n, groups, world) in act else grad_factor

    return scale


def _swap_hw(ets: EtSet, spec: WhatIf, notes: list[str]) -> EtSet:
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.network.nccl import pricer_for_job
    from lumos.simulator.whatif.hardware import ClassRatios, swap_gpu

    if spec.base_hw is None:
        raise ConfigError("--hw needs --base-hw: the system the trace was recorded on")
    assert spec.hw is not None
    old, new = load_system(spec.base_hw), load_system(spec.hw)
    summary = ClassRatios()
    ets = swap_gpu(
        ets,
        CostModel.for_gpu(old.gpu),
        CostModel.for_gpu(new.gpu),
        pricer_for_job(spec.base_hw, ets.world_size),
        pricer_for_job(spec.hw, ets.world_size),
        summary,
    )
    per_class = ", ".join(
        f"{k} x{summary.new_ns[k] / summary.old_ns[k]:.2f} ({summary.kernels[k]})"
        for k in sorted(summary.kernels)
        if summary.old_ns[k]
    )
    notes.append(f"hardware: {old.gpu.name} -> {new.gpu.name}: {per_class or 'no GPU kernels'}")
    return ets


def result_json(res: WhatIfResult, written: list[Path], explain: bool = False) -> dict[str, object]:
    """The `result` of `lumos whatif --json` (schema `lumos/schemas/whatif.json`)."""
    from lumos.simulator.report.breakdown import breakdown
    from lumos.simulator.whatif.explain import explain as explain_dict

    out: dict[str, object] = {}
    for key, sim in (("base", res.base), ("predicted", res.predicted)):
        parts = {b.rank: b for b in breakdown(sim)}
        out[key] = {
            "iteration_time_ns": sim.iteration_time_ns,
            "ranks": [parts[r.rank].to_dict() for r in sim.ranks],
        }
    out["edits"] = list(res.notes)
    out["normalised"] = res.recovered.normalised.notes()
    out["written"] = [str(p) for p in written]
    if explain:
        out["structure"] = explain_dict(res.recovered)
    return out


def run_whatif(target: str | Path | EtSet, spec: WhatIf) -> WhatIfResult:
    """Recover, edit, and simulate base and edited steps (replay of the ETs' times)."""
    # the set as read is not kept past its recovery (a normalised, tagged copy)
    rec = recover(target if isinstance(target, EtSet) else load_etset(target), spec.normalise)
    try:
        edited, notes = apply_edits(rec, spec)
    except DurationOverflowError as exc:  # raised where the node is, not knowing its file
        files, source = rank_files(rec.ets), rec.ets.source
        where = [(r.rank, files.get(r.rank, source), r.nodes) for r in rec.ets.ranks]
        raise exc.located(source or "the trace", where) from None
    base = simulate_etset(contended(rec, rec.ets))
    predicted = simulate_etset(edited)
    return WhatIfResult(base, predicted, rec, edited, notes)
