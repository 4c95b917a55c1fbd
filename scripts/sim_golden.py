"""Golden check of the simulator: every fixture case, every mode, bit for bit.

`record OUT.npz` simulates each case below and saves, per rank, the start/end/wait arrays,
the proc/match columns and the iteration times, plus a digest of every loaded graph's
arrays; `check OUT.npz` re-runs them and fails on the first difference. Meant for
refactors of the simulator's load/plan/loop path that must not change any result.
Converted captures (lumos convert of tests/data/captures, HTA/TraceLens, DLRM) are written
once to a cache folder and reused, so converter changes do not move the baseline.

The baseline comes from the code before the change: `--simulator DIR` runs the
`lumos.simulator` package found in DIR instead of the installed one, e.g.

    git archive <base-commit> simulator | tar -x -C /tmp/base
    python scripts/sim_golden.py record /tmp/sim_golden.npz --simulator /tmp/base/simulator
    python scripts/sim_golden.py check /tmp/sim_golden.npz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIX = REPO.parent / "shared" / "fixtures"
CACHE = Path("/tmp/lumos_golden_et")
MICRO = FIX / "astra-sim/examples/workload/microbenchmarks"
ASTRA_SYS = FIX / "astra-sim/examples/system/native_collectives/HGX-H100-validated.json"
ASTRA_NET = FIX / "astra-sim/examples/network/analytical/HGX-H100-validated.yml"
T2D = FIX / "astra-sim-artifacts/examples/T2D-analytical"
HTA = FIX / "HolisticTraceAnalysis/tests/data"
DLRM = FIX / "param/et_replay/tests/inputs"

GRAPH_FIELDS = (
    "ids",
    "name_idx",
    "type",
    "is_cpu_op",
    "stream",
    "tid",
    "dur_ns",
    "dur_us_ns",
    "gap_ns",
    "start_ns",
    "dep_ptr",
    "dep_idx",
    "comm_type",
    "comm_size",
    "comm_peer",
    "comm_tag",
    "comm_seq",
    "comm_dur_ns",
    "pg_label",
    "group",
    "sync_kind",
    "sync_stream",
    "sync_event",
)


def _converted(name: str, inputs: list[Path]) -> Path:
    out = CACHE / name
    if not (out / "done").exists():
        from lumos.converters.pytorch.convert import convert

        out.mkdir(parents=True, exist_ok=True)
        convert(inputs, out, prefix="t")
        (out / "done").write_text("")
    return out / "t"


def _chakra_feeder() -> Path:
    out = CACHE / "chakra_feeder"
    if not (out / "chakra.0.et").exists():
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(FIX / "chakra/tests/data/feeder_tests_trace.tar.gz") as tar:
            data = tar.extractfile("tests/data/chakra.0.et").read()  # type: ignore[union-attr]
        (out / "chakra.0.et").write_bytes(data)
    return out


def _graph_digest(target: Path, **kw: object) -> str:
    from lumos.simulator.load import load_graphs

    h = hashlib.blake2b(digest_size=16)
    for g in load_graphs(target, **kw):  # type: ignore[arg-type]
        h.update(
            repr((g.rank, g.names, g.pg_labels, g.groups, sorted(g.pg_ranks.items()))).encode()
        )
        h.update(
            repr((g.world_size, g.process_groups, g.measured_step_ns, g.step_start_ns)).encode()
        )
        h.update(
            repr((g.dropped_deps, sorted(g.op_inputs.items()), sorted(g.op_work.items()))).encode()
        )
        for name in GRAPH_FIELDS:
            arr = np.ascontiguousarray(getattr(g, name))
            h.update(f"{name}:{arr.dtype}:{arr.shape}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


def _cases() -> Iterator[tuple[str, Callable[[], object], Callable[[], Any], dict]]:
    """(name, source factory, options factory, load kwargs) for every case."""
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.costmodel.roofline import CostModel
    from lumos.simulator.network.astra import AstraPricer
    from lumos.simulator.network.nccl import pricer_for_job
    from lumos.simulator.run import Mode, SimOptions
    from lumos.simulator.workload.synthetic import StepShape, synthetic_step

    h100 = CostModel.for_gpu(load_system("h100").gpu)

    # the fixtures include single ranks of larger jobs: every case may be part of a set
    fields = SimOptions.__dataclass_fields__  # a --simulator baseline may predate the field
    kw_all: dict[str, object] = {"allow_partial": True} if "allow_partial" in fields else {}

    def model(n: int, **kw: object) -> Callable[[], SimOptions]:
        return lambda: SimOptions(
            Mode.MODEL, pricer_for_job("h100", n), cost_model=h100, **kw_all, **kw
        )  # type: ignore[arg-type]

    def astra(**kw: object) -> Callable[[], SimOptions]:
        return lambda: SimOptions(
            Mode.ASTRA, AstraPricer.from_files(ASTRA_SYS, ASTRA_NET), **kw_all, **kw
        )  # type: ignore[arg-type]

    def replay(**kw: object) -> Callable[[], SimOptions]:
        return lambda: SimOptions(**kw_all, **kw)  # type: ignore[arg-type]

    foreign = []
    for coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for n in (4, 8, 16):
            foreign.append((f"micro/{coll}/{n}", MICRO / coll / f"{n}npus_1MB", n, {}))
    ring = FIX / "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"
    foreign.append(("custom_ring", ring, 8, {}))
    foreign.append(
        ("resnet_dp", FIX / "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar", 64, {})
    )
    foreign.append(("t2d", T2D / "trace", 16, {}))
    groups = json.loads((T2D / "inputs/comm_group.json").read_text())
    foreign.append(("t2d_groups", T2D / "trace", 16, {"comm_groups": groups}))
    foreign.append(("chakra_feeder", _chakra_feeder(), 1, {"repair": True}))
    for name, path, n, kw in foreign:
        yield f"{name}/replay", lambda p=path: p, replay(**kw), kw
        yield f"{name}/model", lambda p=path: p, model(n, **kw), kw
        yield f"{name}/astra", lambda p=path: p, astra(**kw), kw
    yield "resnet_dp/replay_fold", lambda: foreign[13][1], replay(fold=True), {}
    converted = [
        ("ddp", [REPO / "tests/data/captures/ddp"], 2),
        ("fsdp", [REPO / "tests/data/captures/fsdp"], 2),
        ("pipeline", [REPO / "tests/data/captures/pipeline"], 2),
        ("alexnet", [HTA / "critical_path/alexnet"], 1),
        ("cuda_event_sync", [HTA / "critical_path/cuda_event_sync"], 1),
        ("sampled_rank0", [HTA / "trace_filter/sampled_rank-0.json.gz"], 1),
        # one run: the folder's two files are different models (pids, not ranks)
        (
            "tracelens_h100",
            [FIX / "TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"],
            1,
        ),
        ("dlrm", [DLRM / "dlrm_pytorch_et.tar.gz", DLRM / "dlrm_kineto.tar.gz"], 8),
    ]
    for name, inputs, n in converted:
        prefix = _converted(name, inputs)
        yield f"{name}/replay", lambda p=prefix: p, replay(), {}
        yield f"{name}/replay_noalign", lambda p=prefix: p, replay(align_ranks=False), {}
        yield f"{name}/ablate", lambda p=prefix: p, replay(ablate_sync=True), {}
        yield f"{name}/model", lambda p=prefix: p, model(n), {}
        yield f"{name}/replay_fold", lambda p=prefix: p, replay(fold=True), {}
    shape = StepShape(tp=2, pp=4, dp=2, layers_per_stage=2, microbatches=4)
    yield "synthetic/replay", lambda: synthetic_step(shape), replay(), {}
    yield "synthetic/fold", lambda: synthetic_step(shape), replay(fold=True), {}
    yield "synthetic/model", lambda: synthetic_step(shape), model(16), {}


def _run_all() -> dict[str, np.ndarray]:
    from lumos.simulator.run import simulate

    out: dict[str, np.ndarray] = {}
    for name, source, options, load_kw in _cases():
        t0 = time.perf_counter()
        src = source()
        try:
            result = simulate(src, options())  # type: ignore[arg-type]
        except Exception as exc:
            out[f"{name}|error"] = np.frombuffer(f"{type(exc).__name__}: {exc}".encode(), np.uint8)
            print(f"{name}: error {type(exc).__name__}")
            continue
        out[f"{name}|events"] = np.asarray([result.stats["events"]], np.int64)
        out[f"{name}|iteration"] = np.asarray(
            [result.iteration_time_ns] + [r.iteration_time_ns for r in result.ranks], np.int64
        )
        for r in result.ranks:
            t = r.tasks
            for col in ("start_ns", "end_ns", "wait_ns", "proc", "match"):
                out[f"{name}|{r.rank}|{col}"] = np.asarray(getattr(t, col))
        if isinstance(src, Path):
            digest = _graph_digest(src, **load_kw)
            out[f"{name}|graphs"] = np.frombuffer(digest.encode(), np.uint8)
        print(f"{name}: {len(result.ranks)} ranks, {time.perf_counter() - t0:.2f} s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("path", type=Path)
    parser.add_argument("--simulator", type=Path, help="run lumos.simulator from this folder")
    args = parser.parse_args()
    if args.simulator is not None:
        import lumos.simulator

        lumos.simulator.__path__ = [str(args.simulator.resolve())]
    action, path = args.action, args.path
    got = _run_all()
    if action == "record":
        np.savez_compressed(path, **got)
        print(f"recorded {len(got)} arrays to {path}")
        return
    want = dict(np.load(path))
    bad = sorted(set(want) ^ set(got))
    bad += [k for k in sorted(set(want) & set(got)) if not np.array_equal(want[k], got[k])]
    bad += [
        k for k in sorted(set(want) & set(got)) if want[k].dtype != got[k].dtype and k not in bad
    ]
    if bad:
        print(f"MISMATCH in {len(bad)} arrays, e.g.: {bad[:10]}")
        sys.exit(1)
    print(f"all {len(want)} arrays identical")


if __name__ == "__main__":
    main()
