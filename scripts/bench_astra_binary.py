"""lumos's astra mode vs the real ASTRA-sim binary on exported bundles: per-rank equality
and wall time side by side (the same bundle, the same process).

    python scripts/bench_astra_binary.py [--bin-dir DIR] [--aware]

DIR holds AstraSim_Analytical_Congestion_{Unaware,Aware} (default: build.sh's cache).
Prints one row per bundle: ranks, ranks identical, worst per-rank difference, step time
of each, wall seconds of each and their ratio (binary / lumos). Captures are converted
afresh each run into /tmp/lumos_astra_bench (a few seconds), bundles written there too.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lumos.cli.export import simulate_bundle
from lumos.converters.astra_sim.binary import run_bundle
from lumos.converters.astra_sim.export import ExportRequest, export_astra_sim
from lumos.converters.astra_sim.run_script import BACKEND_BINARY

REPO = Path(__file__).resolve().parents[1]
FIX = REPO.parent / "shared" / "fixtures"
CACHE = Path("/tmp/lumos_astra_bench")
BIN = Path.home() / ".cache/astra-sim/astra-sim/build/astra_analytical/build/bin"
MICRO = FIX / "astra-sim/examples/workload/microbenchmarks"
T2D = FIX / "astra-sim-artifacts/examples/T2D-analytical"


def converted(name: str, inputs: list[Path]) -> Path:
    """The capture converted by this checkout's `convert` (every run: ETs cached by an
    older converter gave that converter's numbers)."""
    from lumos.converters.pytorch.convert import convert

    out = CACHE / "et" / name
    shutil.rmtree(out, ignore_errors=True)
    convert(inputs, out, prefix=name)
    return out


def synthetic(ranks: int, kinds: tuple[int, ...]) -> Path:
    """Every rank late by 0-12 µs (seeded), then 1 MiB collectives of `kinds` in turn."""
    import random

    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import write_et
    from lumos.proto import pb

    out = CACHE / "et" / f"synthetic{ranks}_{'_'.join(map(str, kinds))}"
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(5)
    for rank in range(ranks):
        late = pb.Node(id=1, name="late", type=pb.COMP_NODE, duration_micros=rng.randint(0, 12))
        late.attr.extend([make_attr("is_cpu_op", False), make_attr("stream", 7)])
        nodes, dep = [late], 1
        for nid, kind in enumerate(kinds, start=2):
            coll = pb.Node(id=nid, name=f"c{nid}", type=pb.COMM_COLL_NODE, data_deps=[dep])
            coll.attr.extend(
                make_attr(k, v)
                for k, v in (("comm_type", kind), ("comm_size", 1 << 20), ("is_cpu_op", False))
            )
            nodes.append(coll)
            dep = nid
        write_et(out / f"syn.{rank}.et", None, nodes)
    return out


def cases() -> list[tuple[str, Path, dict[str, object]]]:
    rows: list[tuple[str, Path, dict[str, object]]] = []
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for n in (4, 8, 16):
            rows.append((f"micro {kind} {n}", MICRO / kind / f"{n}npus_1MB", {}))
    ring = FIX / "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"
    rows.append(("custom ring 8 (send/recv)", ring, {}))
    rows.append(("T2D 16", T2D / "trace", {"comm_groups_file": T2D / "inputs/comm_group.json"}))
    for cap in ("ddp", "fsdp", "pipeline"):
        rows.append(
            (f"gloo {cap} capture 2", converted(cap, [REPO / "tests/data/captures" / cap]), {})
        )
    rows.append(("synthetic 32, uneven, AR", synthetic(32, (0,)), {}))
    rows.append(("synthetic 32, uneven, 4 kinds", synthetic(32, (2, 7, 6, 0)), {}))
    dlrm = FIX / "param/et_replay/tests/inputs"
    inputs = [dlrm / "dlrm_pytorch_et.tar.gz", dlrm / "dlrm_kineto.tar.gz"]
    rows.append(("DLRM 8xV100 (converted)", converted("dlrm", inputs), {}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, default=BIN)
    parser.add_argument("--aware", action="store_true", help="also the congestion-aware backend")
    args = parser.parse_args()
    backends = ["congestion-unaware", *(["congestion-aware"] if args.aware else [])]
    print(
        f"{'bundle':32} {'backend':18} {'ranks':>5} {'same':>5} {'worst %':>8} "
        f"{'binary ns':>12} {'lumos ns':>12} {'bin s':>6} {'lumos s':>7} {'ratio':>6}"
    )
    for name, target, kw in cases():
        for backend in backends:
            out = CACHE / "bundles" / f"{name}-{backend}".replace(" ", "_")
            # the script's own cache: bundles run by older lumos versions hold the binary's
            # `log/`, which --force rightly refuses to delete
            shutil.rmtree(out, ignore_errors=True)
            summary = export_astra_sim(
                ExportRequest(str(target), out, hw="h100", force=True, backend=backend, **kw)  # type: ignore[arg-type]
            )
            real = run_bundle(out, str(args.bin_dir / BACKEND_BINARY[backend]), summary.ranks)
            ours, wall = simulate_bundle(out, backend)
            pairs = list(zip(real.finish_ns, ours, strict=True))
            same = sum(a == b for a, b in pairs)
            worst = max(abs(b - a) / a for a, b in pairs) * 100
            print(
                f"{name:32} {backend:18} {summary.ranks:>5} {same:>5} {worst:>8.4f} "
                f"{real.step_ns:>12,} {max(ours):>12,} {real.wall_s:>6.2f} {wall:>7.2f} "
                f"{real.wall_s / wall:>6.2f}"
            )


if __name__ == "__main__":
    main()
