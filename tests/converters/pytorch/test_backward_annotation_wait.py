"""The main thread blocked in `loss.backward()` under a `record_function` annotation waits
for the autograd thread: the op after the annotation depends on that thread's last task.

PARAM's DLRM trace wraps backward in `## backward ##` (a user_annotation with nothing of
its own under it, 3.5 ms long, while the autograd thread runs the backward ops and DDP's
all-reduce). Without the edge the two threads are timed independently; replayed over many
iterations (100 copies of DLRM rank 0) they drifted ~21 µs per iteration until the main
thread's optimizer launches overtook the autograd thread's last launches on the shared
stream, behind a stream wait that pointed the other way: the replay stalled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.load import load_graphs
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import PID, TID, Snippet, _x

AUTOGRAD = TID + 1  # the autograd engine's device thread


def _ddp_backward_step() -> Snippet:
    """Main thread: `## backward ##` (no work of its own), then the optimizer's kernel on
    s7. Autograd thread: a gradient kernel on s7, the all-reduce stream s84 waits for it,
    the all-reduce stand-in runs on s84, and s7 waits for it (DDP's finalize); each wait
    is named by Kineto's `cuda_sync` "Wait Event"."""
    k = Snippet()
    k.step(1, 1000.0, 600.0)
    k.op("aten::ones_like", 1002.0, 6.0)
    k.events.append(_x("user_annotation", "## backward ##", PID, TID, 1010.0, 290.0, {}))
    k.op("autograd::engine::evaluate_function: MulBackward0", 1020.0, 80.0, tid=AUTOGRAD)
    k.launch("mul_backward_kernel", 1100.0, stream=7, start=1110.0, dur=30.0, tid=AUTOGRAD)
    waits = [(7, 84, 1106.0, 1109.0), (84, 7, 1118.0, 1121.0)]  # (recorded, waiting, ts, ts)
    for event, (recorded, waiting, rec_ts, wait_ts) in enumerate(waits, 1):
        if event == 2:
            k.launch("reduce_kernel", 1112.0, stream=84, start=1141.0, dur=150.0, tid=AUTOGRAD)
        rec = k.runtime("cudaEventRecord", rec_ts, 2.0, tid=AUTOGRAD)
        wait = k.runtime("cudaStreamWaitEvent", wait_ts, 2.0, tid=AUTOGRAD)
        k.cuda_sync(
            "Wait Event",
            wait,
            wait_ts + 0.5,
            1.0,
            stream=waiting,
            wait_on_stream=recorded,
            wait_on_cuda_event_record_corr_id=rec,
            wait_on_cuda_event_id=event,
            device=0,
            context=1,
        )
    k.op("autograd::engine::evaluate_function: AccumulateGrad", 1125.0, 165.0, tid=AUTOGRAD)
    k.op("Optimizer.step#SGD.step", 1302.0, 28.0)
    k.launch("sgd_kernel", 1310.0, stream=7, start=1320.0, dur=10.0)
    return k


def _graph(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = _ddp_backward_step().write(tmp_path / "rank0.json.gz")
    convert([path], tmp_path / "et", prefix="t")
    return tmp_path / "et" / "t"


def test_op_after_backward_annotation_waits_for_autograd_thread(tmp_path: Path) -> None:
    prefix = _graph(tmp_path)
    nodes: dict[str, pb.Node] = {}
    for n in read_et(next(prefix.parent.glob("t.0.et")))[1]:
        nodes.setdefault(n.name, n)  # an op's first piece (the optimizer's is split by its launch)
    opt = nodes["Optimizer.step#SGD.step"]
    last = nodes["autograd::engine::evaluate_function: AccumulateGrad"]
    assert last.id in opt.data_deps
    assert not nodes["## backward ##"].data_deps  # the annotation itself waits for nothing


def test_slower_autograd_thread_holds_the_optimizer_instead_of_stalling(tmp_path: Path) -> None:
    """Replayed as recorded nothing moves; with the autograd thread's first op 320 µs
    slower (another CPU, a what-if), the optimizer's kernel still reaches s7 after the
    gradient kernel (before the fix it went first, behind DDP's wait: a stall)."""
    prefix = _graph(tmp_path)
    recorded = simulate(prefix).ranks[0].tasks.start_ns
    graphs = load_graphs(prefix)
    g = graphs[0]
    names = np.array(g.names)[g.name_idx]
    slow = int(np.flatnonzero(names == "autograd::engine::evaluate_function: MulBackward0")[0])
    g.dur_ns[slow] += 320_000
    result = simulate(graphs)
    tasks = result.ranks[0].tasks
    row: dict[str, int] = {}
    for i in range(len(g)):
        row.setdefault(g.name(i), i)
    start, end = tasks.start_ns, tasks.end_ns
    assert start[row["sgd_kernel"]] >= end[row["mul_backward_kernel"]]
    assert start[row["sgd_kernel"]] >= end[row["reduce_kernel"]]
    opt = row["Optimizer.step#SGD.step"]
    assert start[opt] >= end[row["autograd::engine::evaluate_function: AccumulateGrad"]]
    assert start[opt] - recorded[opt] >= 300_000  # the main thread waited, as backward() does
