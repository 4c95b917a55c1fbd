"""Long fuzz/fault campaign through the real CLI; prints a table of outcomes per class.

    python scripts/fuzz_harness.py [--scale 1.0] [--seed 0] [--timeout 20]

Classes (and those of `fuzz_hostile.py`: hostile tars, configs, metadata, Kineto and
host-ET fields, names through every output, and resource bombs in a capped child; and of
`fuzz_estimate.py`: plans, model and hardware YAML, the API, `-o`, sweeps, and their bombs):
mutated `.et` files (byte flips, inserts, deletes, cuts), every frame boundary
of every rank file cut, rank-set damage (deleted, stale, mislabelled, mixed ranks),
export bundles damaged after the fact (rank file deleted, added, cut), a killed run's
staging folder and temporary file next to the next output,
mutated Kineto JSON (bytes and field types/values), hostile hardware / ASTRA-sim /
comm-group configs, outputs on a full tmpfs and a read-only mount (when this process may
mount), output paths that are links, devices or folders, and SIGKILL / SIGTERM of
`lumos convert -j 2` at random moments.

Each case is classed as: ok (exit 0 and the result is sound), clean error (a documented
exit code with one `error:` line), traceback (exit 70, a Python traceback, or an
undocumented code), hang (over --timeout, or a child process outliving its killed
parent), wrong result (exit 0 where the input is known bad, e.g. a file cut at a frame
boundary), partial output (a failed run left files, temp files or a half set). Most
cases run in-process (click's CliRunner) for speed; kill cases run `lumos` as a child.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from click.testing import CliRunner  # noqa: E402

from lumos.cli.exits import EXIT_CODES, EXIT_INTERNAL  # noqa: E402
from lumos.cli.main import cli  # noqa: E402
from lumos.converters.chakra.attrs import make_attr  # noqa: E402
from lumos.converters.chakra.stream import iter_frames, with_node_count, write_et  # noqa: E402
from lumos.proto import pb  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import fuzz_estimate  # noqa: E402
import fuzz_hostile  # noqa: E402

DOCUMENTED = {code for code, _ in EXIT_CODES} - {0, EXIT_INTERNAL}
OUTCOMES = ("ok", "clean error", "traceback", "hang", "wrong result", "partial output")
CAPTURE = REPO / "tests" / "data" / "captures" / "ddp"


#: kill cases whose signal arrived while `lumos convert` was still running.
KILLED_MIDWAY: list[int] = []


class Hang(BaseException):
    """Raised by the alarm in an in-process case that ran too long."""


@dataclass(slots=True)
class Run:
    code: int | None
    output: str
    hung: bool = False


#: ASTRA-sim's ring system config of its published regression runs (tests/astra_cases.py
#: holds the tests' copy: scripts do not import the tests)
RING_SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
}


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang


def invoke(args: list[str], timeout: float) -> Run:
    """Run `lumos ARGS` in this process, with an alarm for hangs."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=True)
    except Hang:
        return Run(None, "", hung=True)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    text = result.output + (getattr(result, "stderr", "") or "")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Run(EXIT_INTERNAL, text + f"\nTraceback: {result.exception!r}")
    return Run(result.exit_code, text)


EXAMPLES: dict[str, list[str]] = defaultdict(list)


def classify(run: Run, *, must_fail: bool = False, leftovers: list[str] | None = None) -> str:
    """One outcome for a finished case (examples of bad ones are kept for the report)."""
    outcome = _classify(run, must_fail, leftovers)
    if outcome not in ("ok", "clean error") and len(EXAMPLES[outcome]) < 50:
        EXAMPLES[outcome].append(f"{run.output.strip()[-400:]} {leftovers or ''}")
    return outcome


def _classify(run: Run, must_fail: bool, leftovers: list[str] | None) -> str:
    if run.hung:
        return "hang"
    if run.code == EXIT_INTERNAL or "Traceback" in run.output:
        return "traceback"
    if run.code == 0:
        return "wrong result" if must_fail else "ok"
    if run.code not in DOCUMENTED and run.code != 2:
        return "traceback"
    if leftovers:
        return "partial output"
    return "clean error"


def temp_leftovers(folder: Path) -> list[str]:
    """Temporary or staging files anywhere under `folder`."""
    return [
        str(p)
        for p in folder.rglob("*")
        if "lumos-tmp" in p.name or "lumos-staging" in p.name or p.name.endswith(".tmp")
    ]


# --- seeds -----------------------------------------------------------------------------


def _rank_nodes(rank: int, n: int) -> list[pb.Node]:
    """A chain of compute nodes with an all-reduce every 5th node, as converted ETs are."""
    nodes = []
    for i in range(1, n + 1):
        coll = i % 5 == 0
        node = pb.Node(
            id=i,
            name=f"allreduce_{i}" if coll else f"op{i}",
            type=pb.COMM_COLL_NODE if coll else pb.COMP_NODE,
            duration_micros=5 + (i * 7 + rank) % 13,
        )
        if i > 1:
            node.data_deps.append(i - 1)
        node.attr.append(make_attr("is_cpu_op", False))
        node.attr.append(make_attr("dur_ns", node.duration_micros * 1000))
        if coll:
            node.attr.extend([make_attr("comm_type", pb.ALL_REDUCE), make_attr("comm_size", 4096)])
        nodes.append(node)
    return nodes


def write_set(folder: Path, world: int = 4, n: int = 30, set_id: str = "seed") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(world):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend(
            [make_attr("rank", r), make_attr("world_size", world), make_attr("set_id", set_id)]
        )
        nodes = _rank_nodes(r, n)
        write_et(folder / f"t.{r}.et", with_node_count(meta, len(nodes)), nodes)
    return folder


def kineto_doc(rank: int, world: int = 2, ops: int = 12) -> dict[str, Any]:
    """A small Kineto trace with the real layout: a ProfilerStep, CPU ops, launches and
    their kernels tied by correlation ids, a collective, distributedInfo."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    ]
    t = 1000.0
    events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": t,
            "dur": 40.0 * ops + 100,
            "args": {"External id": 1},
        }
    )
    for i in range(ops):
        t0 = t + 5 + 40 * i
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 20.0,
                "args": {"External id": 10 + i, "Record function id": 10 + i},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t0 + 2,
                "dur": 5.0,
                "args": {"correlation": 100 + i, "External id": 10 + i},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "sgemm_kernel",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 10,
                "dur": 15.0,
                "args": {"stream": 7, "correlation": 100 + i, "device": 0},
            }
        )
    events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "pid": 0,
            "tid": 7,
            "ts": t + 40 * ops,
            "dur": 30.0,
            "args": {
                "stream": 7,
                "correlation": 999,
                "Collective name": "allreduce",
                "In msg nelems": 1024,
                "Out msg nelems": 1024,
                "dtype": "Float",
                "Group size": world,
                "Process Group Name": "0",
                "Process Group Ranks": list(range(world)),
            },
        }
    )
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "traceEvents": events,
    }


# --- mutations -------------------------------------------------------------------------


def mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("flip", "insert", "delete", "cut", "dup"))
        at = rng.randrange(max(1, len(data)))
        if kind == "flip" and data:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == "insert":
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == "delete":
            del data[at : at + rng.randint(1, 8)]
        elif kind == "cut":
            del data[at:]
        elif kind == "dup":
            data[at:at] = data[at : at + rng.randint(1, 64)]
    return bytes(data)


HOSTILE_VALUES: list[Any] = [
    None,
    -1,
    0,
    -5.5,
    1e9,
    10**12,
    2**63,
    "x",
    "",
    "NaN",
    [],
    {},
    [1, 2],
    {"a": 1},
    True,
    1e308,
]


def mutate_json(value: Any, rng: random.Random) -> Any:
    """Replace one random leaf or key's value somewhere in `value` by a hostile one."""
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        out = dict(value)
        out[key] = (
            rng.choice(HOSTILE_VALUES) if rng.random() < 0.4 else mutate_json(value[key], rng)
        )
        return out
    if isinstance(value, list) and value:
        out_list = list(value)
        k = rng.randrange(len(out_list))
        out_list[k] = mutate_json(out_list[k], rng)
        return out_list
    return rng.choice(HOSTILE_VALUES)


# --- case families ---------------------------------------------------------------------


Case = tuple[str, Callable[[], str]]


def et_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    seed = write_set(work / "seed")
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"etm{k}"
            shutil.copytree(seed, folder)
            victim = folder / f"t.{rng.randrange(4)}.et"
            victim.write_bytes(mutate_bytes(victim.read_bytes(), rng))
            cmd = rng.choice(
                (
                    ["et", "validate", str(folder)],
                    ["simulate", str(folder / "t"), "--json"],
                    ["et", "info", str(folder)],
                    ["et", "to-json", str(victim), "-o", str(folder / "x.json")],
                )
            )
            run = invoke(cmd, timeout)
            out = classify(run, leftovers=temp_leftovers(folder))
            shutil.rmtree(folder)
            return out

        yield "et: mutated bytes", case


def frame_cut_cases(work: Path, count: int, timeout: float) -> Iterator[Case]:
    """Rank 1 cut before each node, or both ranks cut before the same node (then no
    collective count differs: only the stated node_count tells the file was cut)."""
    seed = write_set(work / "cutseed", world=2, n=40)
    raws, ends = [], []
    for r in (0, 1):
        raws.append((seed / f"t.{r}.et").read_bytes())
        with open(seed / f"t.{r}.et", "rb") as f:
            ends.append([off for off, _ in iter_frames(f, "t.et")][1:])  # before each node
    cases = max(2, count // 3)
    for k in range(cases):
        node = (k // 2) * len(ends[1]) // (cases // 2) % len(ends[1])  # spread over the file
        for cmd in ("validate", "simulate", "export"):

            def case(k: int = k, node: int = node, cmd: str = cmd) -> str:
                folder = work / f"cut{k}{cmd}"
                shutil.copytree(seed, folder)
                for r in (1, 0) if k % 2 else (1,):
                    (folder / f"t.{r}.et").write_bytes(raws[r][: ends[r][node]])
                args = {
                    "validate": ["et", "validate", str(folder)],
                    "simulate": ["simulate", str(folder / "t")],
                    "export": [
                        "export",
                        "astra-sim",
                        str(folder / "t"),
                        "--hw",
                        "h100",
                        "-o",
                        str(folder / "bundle"),
                    ],
                }[cmd]
                run = invoke(args, timeout)
                left = temp_leftovers(folder) + (
                    [str(folder / "bundle")] if (folder / "bundle").exists() else []
                )
                out = classify(run, must_fail=True, leftovers=left)
                shutil.rmtree(folder)
                return out

            yield "et: cut at every frame boundary (one rank, or all alike)", case


def rank_set_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    for k in range(count):

        def case(k: int = k) -> str:
            folder = write_set(work / f"rs{k}", world=rng.choice((4, 8)), n=10)
            world = len(list(folder.glob("t.*.et")))
            damage = rng.choice(("delete", "stale", "mislabel", "mixed", "gap-foreign"))
            if damage == "delete":
                for r in rng.sample(range(world), rng.randint(1, world - 1)):
                    (folder / f"t.{r}.et").unlink()
            elif damage == "stale":
                write_set(work / f"rs{k}stale", world=world * 2, n=10, set_id="older")
                shutil.copy(work / f"rs{k}stale" / f"t.{world + 1}.et", folder)
            elif damage == "mislabel":
                a, b = rng.sample(range(world), 2)
                (folder / f"t.{a}.et").rename(folder / "tmp.et")
                (folder / f"t.{b}.et").rename(folder / f"t.{a}.et")
                (folder / "tmp.et").unlink()
            elif damage == "mixed":
                other = write_set(work / f"rs{k}other", world=world, n=12, set_id="other")
                r = rng.randrange(world)
                shutil.copy(other / f"t.{r}.et", folder / f"t.{r}.et")
            else:
                shutil.copy(folder / "t.0.et", folder / f"t.{world + 3}.et")
            cmd = rng.choice(
                (
                    ["et", "validate", str(folder)],
                    ["simulate", str(folder / "t")],
                    ["compare", str(folder / "t")],
                    [
                        "export",
                        "astra-sim",
                        str(folder / "t"),
                        "--hw",
                        "h100",
                        "-o",
                        str(folder / "bundle"),
                    ],
                )
            )
            run = invoke(cmd, timeout)
            left = [str(folder / "bundle")] if (folder / "bundle").exists() else []
            return classify(run, must_fail=True, leftovers=left)

        yield "rank set: missing/stale/mislabelled/mixed", case


def bundle_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    """An exported bundle damaged after the fact: a rank file deleted, added, or cut at a
    frame boundary (with or without its node_count): the pre-flight must refuse it."""
    seed = work / "bundleseed"
    run = invoke(["export", "astra-sim", str(write_set(work / "bset", world=4, n=30) / "t"),
                  "--hw", "h100", "-o", str(seed)], timeout)  # fmt: skip
    if run.code != 0:
        raise RuntimeError(f"seed export failed: {run.output[-300:]}")
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"bundle{k}"
            shutil.copytree(seed, folder)
            files = sorted((folder / "workload").glob("t.*.et"))
            victim = rng.choice(files)
            damage = rng.choice(("delete", "extra", "cut", "cut-uncounted"))
            if damage == "delete":
                victim.unlink()
            elif damage == "extra":
                shutil.copy(victim, folder / "workload" / f"t.{len(files)}.et")
            else:
                with open(victim, "rb") as f:
                    frames = list(iter_frames(f, str(victim)))  # metadata, then the nodes
                keep = rng.randrange(1, len(frames) - 1)  # at least one node cut off
                if damage == "cut":
                    victim.write_bytes(victim.read_bytes()[: frames[keep + 1][0]])
                else:  # rewritten short by a foreign tool: no node_count left to check
                    meta = pb.GlobalMetadata.FromString(frames[0][1])
                    kept = [a for a in meta.attr if a.name != "node_count"]
                    del meta.attr[:]
                    meta.attr.extend(kept)
                    nodes = [pb.Node.FromString(x) for _, x in frames[1 : keep + 1]]
                    victim.unlink()
                    write_et(victim, meta, nodes)
            out = classify(
                invoke(["export", "astra-sim-check", str(folder)], timeout), must_fail=True
            )
            shutil.rmtree(folder)
            return out

        yield "bundle: rank file deleted/added/cut", case


def leftover_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    """What a killed run leaves (a dead process's staging folder and temporary file) next
    to an output: the next writer of any kind must remove it, never read it as a set."""
    trace = write_set(work / "lset", world=2, n=20)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(dead.stdout)
    for k in range(count):

        def case(k: int = k) -> str:
            out = work / f"left{k}"
            out.mkdir()
            stage = out / f".trace.{pid}.{k:06x}.lumos-staging"
            write_set(stage, world=2, n=5)
            (out / f".g.dot.{pid}.{k:08x}.lumos-tmp").write_text("digraph {")
            writer = rng.choice(("graph", "export", "to-json", "simulate-stale"))
            args = {
                "graph": ["et", "graph", str(trace / "t.0.et"), "-o", str(out / "g.dot")],
                "export": ["export", "astra-sim", str(trace / "t"), "--hw", "h100", "-o",
                           str(out / "bundle")],
                "to-json": ["et", "to-json", str(trace / "t.0.et"), "-o", str(out / "a.json")],
                "simulate-stale": ["simulate", str(stage / "t")],
            }[writer]  # fmt: skip
            run = invoke(args, timeout)
            if writer == "simulate-stale":
                outcome = classify(run, must_fail=True)
            else:
                left = [p.name for p in out.iterdir() if "lumos-" in p.name]
                outcome = classify(run, leftovers=left)
                if outcome == "ok" and left:
                    outcome = "partial output"
                    EXAMPLES[outcome].append(f"{writer} left {left}")
            shutil.rmtree(out)
            return outcome

        yield "leftovers: killed run's staging/temp next to an output", case


def json_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    docs = [kineto_doc(0), kineto_doc(1)]
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"js{k}"
            folder.mkdir()
            texts = [orjson.dumps(d) for d in docs]
            victim = rng.randrange(2)
            if rng.random() < 0.5:
                texts[victim] = mutate_bytes(texts[victim], rng)
            else:
                try:
                    texts[victim] = orjson.dumps(mutate_json(docs[victim], rng))
                except TypeError:
                    texts[victim] = texts[victim][: len(texts[victim]) // 2]
            for r, text in enumerate(texts):
                data = gzip.compress(text) if r == 1 else text
                (folder / f"rank{r}.kineto.json{'.gz' if r == 1 else ''}").write_bytes(data)
            out = folder / "out"
            run = invoke(["convert", str(folder), "-o", str(out), "--prefix", "t"], timeout)
            left = temp_leftovers(folder)
            if run.code != 0 and out.exists() and any(out.iterdir()):
                left.append(str(out))
            verdict = classify(run, leftovers=left)
            if verdict == "ok":  # a success must be a whole, valid set
                check = invoke(["et", "validate", str(out)], timeout)
                if (
                    check.code not in (0, 1)
                    or "rank-missing" in check.output
                    or "rank-set" in check.output
                ):
                    verdict = "wrong result"
            shutil.rmtree(folder)
            return verdict

        yield "convert: mutated Kineto JSON", case


def config_cases(work: Path, rng: random.Random, count: int, timeout: float) -> Iterator[Case]:
    import yaml

    trace = write_set(work / "cfgset", world=8, n=10)
    system = dict(RING_SYSTEM)
    network = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
    hw = yaml.safe_load((REPO / "hwconfigs" / "systems" / "h100.yaml").read_text())
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"cfg{k}"
            folder.mkdir()
            which = rng.choice(("system", "network", "hw", "groups", "bytes"))
            sys_doc, net_doc, hw_doc = system, network, hw
            groups: Any = {"0": list(range(8))}
            if which == "system":
                sys_doc = mutate_json(system, rng)
            elif which == "network":
                net_doc = mutate_json(network, rng)
            elif which == "hw":
                hw_doc = mutate_json(hw, rng)
            elif which == "groups":
                groups = rng.choice(([[0, 1], [2, 3]], mutate_json(groups, rng), "x", [1]))
            (folder / "system.json").write_text(_json_text(sys_doc))
            (folder / "network.yml").write_text(yaml.safe_dump(net_doc))
            (folder / "hw.yaml").write_text(yaml.safe_dump(hw_doc))
            (folder / "groups.json").write_text(_json_text(groups))
            if which == "bytes":
                victim = folder / rng.choice(
                    ("system.json", "network.yml", "hw.yaml", "groups.json")
                )
                victim.write_bytes(mutate_bytes(victim.read_bytes(), rng) + b"\xff\xfe")
            cmd = rng.choice(
                (
                    ["simulate", str(trace / "t"), "--hw", str(folder / "hw.yaml")],
                    [
                        "simulate",
                        str(trace / "t"),
                        "--astra-sim-system",
                        str(folder / "system.json"),
                        "--astra-sim-network",
                        str(folder / "network.yml"),
                        "--comm-groups",
                        str(folder / "groups.json"),
                    ],
                    [
                        "export",
                        "astra-sim",
                        str(trace / "t"),
                        "--astra-sim-system",
                        str(folder / "system.json"),
                        "--astra-sim-network",
                        str(folder / "network.yml"),
                        "-o",
                        str(folder / "bundle"),
                    ],
                )
            )
            run = invoke(cmd, timeout)
            left = temp_leftovers(folder)
            if run.code != 0 and (folder / "bundle").exists():
                left.append("bundle")
            verdict = classify(run, leftovers=left)
            shutil.rmtree(folder)
            return verdict

        yield "configs: hostile values and bytes", case


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value)  # Python's writer: NaN and Infinity come out as such


def output_cases(work: Path, timeout: float) -> Iterator[Case]:
    trace = write_set(work / "outset", world=2, n=20)

    def dev_link(d: Path, name: str) -> str:
        os.symlink("/dev/null", d / name)
        return str(d / name)

    def folder(d: Path, name: str) -> str:
        (d / name).mkdir()
        return str(d / name)

    def file_link(d: Path, name: str) -> str:
        (d / ("real" + name)).write_text("{}")
        os.symlink(d / ("real" + name), d / name)
        return str(d / name)

    targets: list[tuple[str, Callable[[Path, str], str]]] = [
        ("dev-null-link", dev_link),
        ("folder", folder),
        ("missing-parent", lambda d, name: str(d / "no" / name)),
        ("dash", lambda d, name: "-"),
        ("link-to-file", file_link),
    ]
    for label, make in targets:
        for cmd in ("to-json", "graph", "timeline"):

            def case(
                label: str = label, make: Callable[[Path, str], str] = make, cmd: str = cmd
            ) -> str:
                where = work / f"out-{label}-{cmd}"
                where.mkdir()
                name = "x.dot" if cmd == "graph" else "x.json"
                target = make(where, name)
                args = {
                    "to-json": ["et", "to-json", str(trace / "t.0.et"), "-o", target, "--force"],
                    "graph": ["et", "graph", str(trace / "t"), "-o", target, "--force"],
                    "timeline": ["simulate", str(trace / "t"), "--timeline", target, "--force"],
                }[cmd]
                run = invoke(args, timeout)
                verdict = classify(run, leftovers=temp_leftovers(where))
                if label == "link-to-file" and run.code == 0 and not (where / name).is_symlink():
                    verdict = "wrong result"  # the link was replaced instead of written through
                if Path("-").exists() or not Path("/dev/null").is_char_device():
                    verdict = "wrong result"
                return verdict

            yield "outputs: links, devices, folders, -", case


@contextlib.contextmanager
def mounted(kind: str, work: Path) -> Iterator[Path | None]:
    """A 256 KiB tmpfs (`full`) or a read-only tmpfs (`ro`), or None if we cannot mount."""
    mnt = work / f"mnt-{kind}"
    mnt.mkdir(parents=True, exist_ok=True)
    opts = "size=256k" if kind == "full" else "size=1m"
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        yield None
        return
    try:
        if kind == "full":
            (mnt / "filler").write_bytes(b"\0" * (250 << 10))
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def disk_cases(work: Path, timeout: float) -> Iterator[Case]:
    trace = write_set(work / "diskset", world=2, n=400)
    kineto = work / "diskkin"
    kineto.mkdir()
    for r in (0, 1):
        (kineto / f"rank{r}.kineto.json").write_bytes(orjson.dumps(kineto_doc(r, ops=400)))
    commands: list[Callable[[Path], list[str]]] = [
        lambda m: ["convert", str(kineto), "-o", str(m / "conv")],
        lambda m: ["et", "to-json", str(trace / "t.0.et"), "-o", str(m / "a.json")],
        lambda m: ["et", "graph", str(trace / "t"), "-o", str(m / "g.graphml")],
        lambda m: ["export", "astra-sim", str(trace / "t"), "--hw", "h100", "-o", str(m / "b")],
        lambda m: ["simulate", str(trace / "t"), "--timeline", str(m / "tl.json")],
        lambda m: ["simulate", str(trace / "t"), "--plot", str(m / "p")],
    ]
    for kind in ("full", "ro"):
        for k, make in enumerate(commands):

            def case(kind: str = kind, make: Callable[[Path], list[str]] = make, k: int = k) -> str:
                with mounted(kind, work / f"d{kind}{k}") as mnt:
                    if mnt is None:
                        return "skipped"
                    before = {p.name for p in mnt.iterdir()}
                    run = invoke(make(mnt), timeout)
                    after = {p.name for p in mnt.iterdir()} - before
                    left = sorted(after) if run.code != 0 else []
                    return classify(run, must_fail=True, leftovers=left)

            yield f"disk: {'full tmpfs' if kind == 'full' else 'read-only mount'}", case


def kill_cases(work: Path, rng: random.Random, count: int) -> Iterator[Case]:
    """Half the cases convert the DDP capture (0.5 s: a signal often comes after the
    end), half a pair of 40 MB Kineto traces (about 3 s: the signal comes mid-run)."""
    lumos = Path(sys.executable).with_name("lumos")
    big = work / "killbig"
    big.mkdir()
    for r in (0, 1):
        (big / f"rank{r}.kineto.json").write_bytes(orjson.dumps(kineto_doc(r, ops=100_000)))
    took = {}  # a whole run of each, so the signals fall inside it
    for source in (CAPTURE, big):
        began = time.monotonic()
        subprocess.run([str(lumos), "convert", str(source), "-o", str(work / "killtime"), "-j",
                        "2", "-q", "--force"], capture_output=True, check=True)  # fmt: skip
        took[source] = time.monotonic() - began
    for k in range(count):

        def case(k: int = k) -> str:
            out = work / f"kill{k}"
            sig = rng.choice((signal.SIGKILL, signal.SIGTERM, signal.SIGINT))
            source = CAPTURE if k % 2 else big
            delay = rng.uniform(0.05, 1.1 * took[source])
            proc = subprocess.Popen(
                [str(lumos), "convert", str(source), "-o", str(out), "-j", "2", "-q"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            time.sleep(delay)
            finished = proc.poll() is not None
            if not finished:
                proc.send_signal(sig)
                KILLED_MIDWAY.append(k)
            try:
                _, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                return "hang"
            deadline = time.time() + 5
            while time.time() < deadline:
                try:
                    os.killpg(proc.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return "hang"  # an orphaned worker outlived its parent
            text = err.decode(errors="replace")
            if "Traceback" in text:
                EXAMPLES["traceback"].append(f"{sig.name} after {delay:.2f} s: {text[-1500:]}")
                return "traceback"
            visible = sorted(p.name for p in out.iterdir()) if out.exists() else []
            if proc.returncode == 0:
                return "ok" if visible == ["trace.0.et", "trace.1.et"] else "partial output"
            if visible and visible != ["trace.0.et", "trace.1.et"]:
                return "partial output"
            hidden = [p for p in out.parent.glob(f".{out.name}.*lumos-staging")]
            if hidden and sig != signal.SIGKILL:
                return "partial output"
            if hidden:  # SIGKILL cannot clean up: the next conversion must sweep it
                again = subprocess.run(
                    [str(lumos), "convert", str(source), "-o", str(out), "-q"], capture_output=True
                )
                if again.returncode or list(out.parent.glob(f".{out.name}.*lumos-staging")):
                    return "partial output"
            return "clean error"

        yield "kill: SIGKILL/SIGTERM/SIGINT of convert -j 2 at random moments", case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="Multiply case counts.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="Seconds before a hang.")
    parser.add_argument("--show", type=int, default=3, help="Examples shown per bad outcome.")
    parser.add_argument(
        "--only", default="", help="Run only the classes whose label contains this text."
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    n = lambda base: max(1, int(base * args.scale))  # noqa: E731
    table: dict[str, Counter[str]] = defaultdict(Counter)
    began = time.time()
    with tempfile.TemporaryDirectory(prefix="lumos-fuzz-") as tmp:
        work = Path(tmp)
        os.chdir(work)
        families = [
            et_cases(work, rng, n(700), args.timeout),
            frame_cut_cases(work, n(120), args.timeout),
            rank_set_cases(work, rng, n(250), args.timeout),
            bundle_cases(work, rng, n(80), args.timeout),
            leftover_cases(work, rng, n(60), args.timeout),
            json_cases(work, rng, n(650), args.timeout),
            config_cases(work, rng, n(300), args.timeout),
            output_cases(work, args.timeout),
            disk_cases(work, args.timeout),
            kill_cases(work, rng, n(30)),
            *fuzz_hostile.families(sys.modules[__name__], work, rng, n, args.timeout, args.only),
            *fuzz_estimate.families(sys.modules[__name__], work, rng, n, args.timeout, args.only),
        ]
        for family in families:
            for label, case in family:
                if args.only not in label:
                    continue
                try:
                    outcome = case()
                except Exception as exc:  # the harness itself must not stop the campaign
                    outcome = "traceback"
                    EXAMPLES[outcome].append(f"harness: {exc!r}")
                if outcome == "skipped":
                    continue
                table[label][outcome] += 1
            print(f"  {label}: done ({time.time() - began:.0f} s)", file=sys.stderr)
    _print(table, time.time() - began)
    fuzz_hostile.print_bombs()
    for outcome, examples in EXAMPLES.items():
        for text in examples[: args.show]:
            print(f"\n[{outcome}] {text}")


def _print(table: dict[str, Counter[str]], seconds: float) -> None:
    head = f"| class | tried | {' | '.join(OUTCOMES)} |"
    print(head)
    print("|" + "---|" * (len(OUTCOMES) + 2))
    total: Counter[str] = Counter()
    for label, counts in table.items():
        total.update(counts)
        cells = " | ".join(str(counts[o]) for o in OUTCOMES)
        print(f"| {label} | {sum(counts.values())} | {cells} |")
    cells = " | ".join(str(total[o]) for o in OUTCOMES)
    print(f"| **all** | {sum(total.values())} | {cells} |")
    print(f"\n{sum(total.values())} cases in {seconds:.0f} s")
    print(f"kill cases whose signal arrived mid-run: {len(KILLED_MIDWAY)}")


if __name__ == "__main__":
    main()
