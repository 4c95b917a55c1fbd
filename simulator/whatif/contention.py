"""Host CPU contention: the time slices a step loses when its threads outnumber the cores.

Normalisation (`preemption`) trims the whole time slices that the operating system took
from a traced thread, so that an edit does not copy a slice into every layer it adds. But
the slices are not an accident of one step: on a host where the job runs more busy
threads than it has cores (ranks sharing a machine's cores with their communication
threads, as in CPU/gloo captures: a DDP all-reduce's gloo transfer runs beside both
ranks' backward), the operating system time-shares the cores between them. An edited step
that oversubscribes the cores as much loses time the same way; one that does not (one
rank instead of two, a pipeline whose stages compute while no transfer runs) loses almost
none (docs/whatif.md: measured / normalised replay 1.06 - 1.15 on the grid's 2-rank DDP
steps, 1.00 on one rank, 1.02 - 1.03 on the pipelines).

The model is fluid and has one parameter, read from the traced step itself:

* the host's cores `C` are the traced ranks' count (the ranks of a CPU-only trace ran on
  one machine, one core per rank: what `torchrun --nproc-per-node` on a CPU host does);
* `full_ns` is the time during which more than `C` of the host's CPU threads were busy in
  the normalised step's replay (an op, or the transfer of a collective on a CPU thread):
  the host is oversubscribed;
* the loss rate is `rate = lost / full_ns`, `lost` the time the trimmed slices took out
  of the step: the step replayed with its waits anchored but nothing trimmed, minus the
  normalised step (the slowest rank's each; a late peer's wait is not a lost slice);
* an edited step's CPU ops are stretched by `1 + rate * f`, `f` the share of the op's own
  time spent while the host was oversubscribed in the edited step's replay; the replay
  changes when the ops stretch, so this is iterated (`ITERATIONS` passes, from the
  unstretched times).

So the expected loss follows the edit: as many oversubscribed milliseconds as the edited
step has, at the rate the traced step lost them. Counting time with exactly `C` busy
threads instead (an earlier version) gave the pipelines the DDP base's loss: +4.6 / +4.5 %
on the grid's PP rows against -0.7 / +0.1 % now. A trace with GPU work, or one rank, or
whose normalisation trimmed nothing, is left alone (`rate` 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.proto import pb
from lumos.simulator.result import ProcKind, SimResult
from lumos.simulator.run import SimOptions
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, simulate_etset

#: stretch passes (each one re-simulates the edited step)
ITERATIONS = 2
#: a loss under this share of the step is not modelled (nothing worth two more replays)
MIN_LOSS_SHARE = 0.005
#: the largest rate: a thread that ran at half speed whenever the host was oversubscribed
#: (one slice in a short step can read as more lost time than oversubscribed time; the
#: multi-step grid's 2-rank bases read 0.10 - 0.82)
MAX_RATE = 1.0


@dataclass(frozen=True, slots=True)
class Contention:
    """The traced step's contention: `cores` (busy threads the host runs at once), `rate`
    (step time lost per ns of oversubscribed host: `full_ns`), and what it was read from
    (ns)."""

    cores: int = 0
    rate: float = 0.0
    lost_ns: int = 0
    full_ns: int = 0

    @property
    def active(self) -> bool:
        return self.rate > 0 and self.cores > 0

    def note(self) -> str:
        if not self.active:
            return ""
        return (
            f"host contention: the traced step lost {self.lost_ns / 1e6:.2f} ms of time "
            f"slices over {self.full_ns / 1e6:.2f} ms with more threads busy than its "
            f"{self.cores} cores (rate {self.rate:.3f}); edited CPU ops lose time at that "
            "rate while the host is oversubscribed"
        )


def _options() -> SimOptions:
    return SimOptions(align_ranks=False, timelines=True, relative_holds=True)


def _cpu_rows(sim: SimResult) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per rank: (rank, node ids, active starts, ends) of its rows on CPU threads."""
    out = []
    for r in sim.ranks:
        t = r.tasks
        cpu = np.array([p.kind is ProcKind.CPU and p.key is not None for p in r.processors])
        keep = cpu[t.proc] if len(t) else np.zeros(0, dtype=bool)
        start = np.where(t.is_comm, t.start_ns + t.wait_ns, t.start_ns)[keep]
        out.append((r.rank, t.node_id[keep], start, t.end_ns[keep]))
    return out


def _full_spans(sim: SimResult, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """The host's oversubscribed intervals (more than `cores` CPU threads busy) as
    (starts, ends)."""
    rows = _cpu_rows(sim)
    starts = np.concatenate([s for _, _, s, _ in rows]) if rows else np.zeros(0, np.int64)
    ends = np.concatenate([e for _, _, _, e in rows]) if rows else np.zeros(0, np.int64)
    live = ends > starts
    times = np.concatenate([starts[live], ends[live]])
    steps = np.concatenate([np.ones(live.sum(), np.int64), -np.ones(live.sum(), np.int64)])
    order = np.lexsort((steps, times))  # ends before starts at the same instant
    times, busy = times[order], np.cumsum(steps[order])
    full = busy[:-1] > cores  # from each event to the next
    return times[:-1][full], times[1:][full]


def _covered(
    spans: tuple[np.ndarray, np.ndarray], start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per interval [start, end): the time the spans (sorted, disjoint) cover of it."""
    s, e = spans
    if not len(s):
        return np.zeros(len(start))
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def upto(x: np.ndarray) -> np.ndarray:  # covered time in (-inf, x)
        i = np.searchsorted(s, x, side="right")  # spans starting at or before x
        prev_end = np.where(i > 0, e[np.maximum(i - 1, 0)], 0)
        partial = np.where(i > 0, np.minimum(x, prev_end) - s[np.maximum(i - 1, 0)], 0)
        return cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(partial, 0)

    return np.maximum(upto(end) - upto(start), 0)


def _full_ns(sim: SimResult, cores: int) -> int:
    s, e = _full_spans(sim, cores)
    return int((e - s).sum())


def full_time(ets: EtSet, cores: int) -> int:
    """The time (ns) more than `cores` CPU threads of the set's host are busy in its replay."""
    return _full_ns(simulate_etset(ets, _options()), cores)


def measure(untrimmed: EtSet, normalised: EtSet) -> Contention:
    """The traced step's contention from the step before and after trimming its lost
    slices (see module doc); inactive where it does not apply."""
    if untrimmed.world_size < 2 or any(nd.on_gpu(n) for r in untrimmed.ranks for n in r.nodes):
        return Contention()
    as_traced = simulate_etset(untrimmed).iteration_time_ns
    norm = simulate_etset(normalised, _options())
    lost = as_traced - norm.iteration_time_ns
    if lost <= MIN_LOSS_SHARE * as_traced:
        return Contention()
    cores = untrimmed.world_size
    full = _full_ns(norm, cores)
    if full <= 0:
        return Contention()
    return Contention(cores, min(MAX_RATE, lost / full), lost, full)


def _stretched(ets: EtSet, sim: SimResult, c: Contention) -> EtSet:
    spans = _full_spans(sim, c.cores)
    factor: dict[int, dict[int, float]] = {}
    for rank, ids, start, end in _cpu_rows(sim):
        span = np.maximum(end - start, 1)
        share = _covered(spans, start, end) / span
        factor[rank] = dict(zip(ids.tolist(), (1.0 + c.rate * share).tolist(), strict=True))
    ranks = []
    for r in ets.ranks:
        f = factor.get(r.rank, {})
        out = []
        for n in r.nodes:
            k = f.get(n.id, 1.0)
            if k > 1.0 and n.type == pb.COMP_NODE and nd.is_cpu(n):
                n = nd.clone(n)
                nd.set_duration(n, round(nd.duration(n) * k))
            out.append(n)
        ranks.append(RankEt(r.rank, r.metadata, tuple(out)))
    return EtSet(tuple(ranks), ets.source)


def recontend(ets: EtSet, c: Contention) -> EtSet:
    """`ets` with its CPU ops stretched by the expected loss (identity when inactive)."""
    if not c.active:
        return ets
    out = ets
    for _ in range(ITERATIONS):
        out = _stretched(ets, simulate_etset(out, _options()), c)
    return out
