"""Hostile-input families of the fuzz campaign for the trace-free side (third audit):
`lumos estimate`, `lumos sweep`, `lumos.estimate`, model and hardware YAML, `-o ET_DIR`.
Used by `scripts/fuzz_harness.py` like `fuzz_hostile.py`:

- plans: degrees, batches, sequences and `--gpus` drawn from values that divide, do not
  divide, and are huge, on dense, GQA and mixture-of-experts models; exit 0 on a plan an
  independent oracle says no framework runs (heads, key/value heads or FFN % tp, gbs %
  (mbs x dp), seq % 2cp, experts % ep, `--gpus` != tp x pp x dp x cp) is a wrong result;
- models / hardware: one key of a spec or of an inlined system set to NaN, infinities,
  bools, strings (`"12"`, `"1e3"`), None, lists, mappings, 0, negatives, 1e-300, 1e300;
  top levels that are lists, scalars, empty; repeated keys, alias bombs, Python tags,
  nesting past the recursion limit, folders, devices, binary and 2 MB files;
- API: `lumos.estimate(**plan)` with each field of every type;
- outputs: `-o` a file, a folder holding a user's file, `''`, `-`, `/dev/null`, a link, a
  path under a file, a second write, `--force` over a foreign set, a read-only mount, a
  full tmpfs, and SIGINT / SIGTERM / SIGKILL of a 64-rank `--all-ranks` write at random
  moments (the folder is absent or whole; only SIGKILL leaves a hidden staging folder,
  swept by the next writer);
- sweeps: grids of hostile axis values (0, -1, 1.5, words, repeats, hundreds of values),
  bad `-o`, `--top`, `--workers`, and journals with flipped bytes;
- bombs (in `fuzz_hostile`'s capped child): a 34 MB model file, 200^3 and 2000^3 grids,
  65,536 micro-batches simulated whole, rates of 1e-300, `--workers 100000`, 131,072
  ranks written with `--all-ranks`.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import fuzz_hostile as fh
import yaml

REPO = Path(__file__).resolve().parents[1]
HW = REPO / "hwconfigs"
PLANS = "estimate: plans that do not divide, huge degrees and batches, --gpus"
MODELS = "estimate: model YAML typed values, structure, files"
HARDWARE = "estimate: hardware YAML NaN/inf/0/negative/tiny/huge, names"
API = "estimate API: plan fields of every type"
OUTPUTS = "estimate -o: files, folders, '', links, read-only, full disk, kills"
SWEEPS = "sweep: hostile grids, outputs, journals, workers"
Case = tuple[str, Callable[[], str]]
DEGREES = [1, 1, 2, 2, 3, 4, 5, 7, 8, 8, 16, 32, 10**6, 10**9]
MODEL_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "mlp", "norm",
              "tied_embeddings", "position", "bias")  # fmt: skip
TYPED = [*fh.TYPED, "1e3", 2.5, 1e-300, 1e300]
#: widths at and past `LUMOS_MAX_WIDTH` (round 3: hidden 10^12 ended in a 64-bit error
#: naming no key, vocab / ffn 10^12 estimated a 30,749 s step)
WIDTH = 1 << 24
WIDE = [WIDTH, WIDTH + 1, 10**9, 10**12]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _dims(name: str) -> Any:
    from lumos.simulator.workload.spec import load_model

    return load_model(name)


def plan_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
               ) -> Iterator[Case]:  # fmt: skip
    models = ["llama3.1-8b", "gpt3-1.3b", "mixtral-8x7b", "qwen3-30b-a3b"]
    for _ in range(count):
        name = rng.choice(models)
        p = {k: rng.choice(DEGREES[:11]) if rng.random() < 0.9 else rng.choice(DEGREES)
             for k in ("tp", "pp", "dp", "cp")}  # fmt: skip
        p["vp"] = rng.choice([1, 1, 1, 2, 3])
        p["ep"] = rng.choice([1, 1, 2, 3, 8]) if "b-a3b" in name or "mix" in name else 1
        p["mbs"] = rng.choice([1, 1, 2, 3, 10**6])
        p["gbs"] = rng.choice([None, None, 6, 64, 256, 10**9])
        p["seq"] = rng.choice([None, None, 512, 1000, 8191, 10**7, 10**12])
        world = p["tp"] * p["pp"] * p["dp"] * p["cp"]
        gpus = rng.choice([None, None, world, 2 * world, world // 2, 10**9])

        def case(name: str = name, p: dict[str, Any] = p, gpus: Any = gpus) -> str:
            args = ["estimate", "--model", name]
            args += [x for k, v in p.items() if v is not None for x in (f"--{k}", str(v))]
            args += ["--gpus", str(gpus)] if gpus is not None else []
            run = h.invoke(args, timeout)
            verdict = h.classify(run, must_fail=not _runs(_dims(name), p, gpus))
            world = p["tp"] * p["pp"] * p["dp"] * p["cp"]
            if run.code == 0 and f" on {world} x " not in run.output:
                verdict = "wrong result"
            return verdict

        yield PLANS, case


def _runs(m: Any, p: dict[str, Any], gpus: int | None) -> bool:
    """Whether Megatron-Core could run plan `p` of model `m` (an oracle apart from lumos)."""
    tp, dp, cp, ep = p["tp"], p["dp"], p["cp"], p["ep"]
    gbs, seq = p["gbs"] or p["mbs"] * dp, p["seq"] or m.seq
    return not (
        m.heads % tp or m.kv_heads % tp or m.ffn % tp or gbs % (p["mbs"] * dp)
        or (cp > 1 and seq % (2 * cp)) or (m.experts and m.experts % ep)
        or (not m.experts and ep > 1) or (gpus is not None and gpus != tp * p["pp"] * dp * cp)
        or seq > WIDTH
    )  # fmt: skip


def model_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                ) -> Iterator[Case]:  # fmt: skip
    base: dict[str, Any] = {"layers": 4, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1024,
                            "vocab": 32000, "seq": 1024, "mlp": "swiglu", "norm": "rmsnorm"}  # fmt: skip
    fixed = {
        "list": "- layers: 4\n",
        "scalar": "12\n",
        "empty": "",
        "repeat": yaml.safe_dump(base) + "layers: 8\n",
        "bomb": yaml.safe_dump(base) + f"name: {fh.LAUGHS}\n",
        "tag": yaml.safe_dump(base) + "name: !!python/object/apply:os.system ['true']\n",
        "deep": yaml.safe_dump(base) + "name: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "binary": b"\xff\xfe\x00layers",
        "big": yaml.safe_dump(base) + "# pad\n" * 400_000,
        "unknown": yaml.safe_dump({**base, "layerz": 4}),
        "anchors": "layers: 4\nhidden: 512\nheads: &h 8\nkv_heads: *h\nvocab: 32000\n",
        "folder": None,
        "device": None,
    }
    cases: list[tuple[str, Any, bool]] = [(k, v, k != "anchors") for k, v in fixed.items()]
    moe = {**base, "experts": 8, "top_k": 2}
    cases += [("moe_ffn=0", {**moe, "moe_ffn": 0}, True), ("top_k>experts", {**moe, "top_k": 9}, True),
              ("experts=1e9", {**moe, "experts": 10**9}, True), ("moe_ffn=1e12", {**moe, "moe_ffn": 10**12}, True)]  # fmt: skip
    for _ in range(count):
        key = rng.choice(MODEL_KEYS)
        value = rng.choice(WIDE) if rng.random() < 0.2 else rng.choice(TYPED)
        good = {"mlp": value in ("gelu", "swiglu", "squared_relu"), "norm": value in
                ("layernorm", "rmsnorm"), "position": value in ("rope", "learned"),
                "tied_embeddings": isinstance(value, bool), "bias": isinstance(value, bool)
                }.get(key, _is_count(value))  # fmt: skip
        good |= value is None  # `key: null` is the key left out (as in a config.json)
        good &= not (_is_count(value) and value > (1 << 14 if key == "layers" else WIDTH))
        cases.append((f"{key}={value!r:.20}", {**base, key: value}, not good))
    for label, spec, must_fail in cases:

        def case(label: str = label, spec: Any = spec, must_fail: bool = must_fail) -> str:
            folder = work / f"model-{len(os.listdir(work))}"
            folder.mkdir()
            path = folder / "m.yaml"
            if label == "folder":
                path.mkdir()
            elif label == "device":
                path = Path("/dev/zero")
            elif isinstance(spec, bytes):
                path.write_bytes(spec)
            elif isinstance(spec, dict):
                path.write_text(yaml.safe_dump(spec))  # .nan / .inf / 1.0e-300 as YAML has them
            else:
                path.write_text(spec)
            run = h.invoke(["estimate", "--model", str(path), "--tp", "2"], timeout)
            return h.classify(run, must_fail=must_fail)

        yield MODELS, case


def hardware_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                   ) -> Iterator[Case]:  # fmt: skip
    gpu = yaml.safe_load((HW / "gpus" / "h100_sxm.yaml").read_text())
    node = yaml.safe_load((HW / "nodes" / "hgx_h100.yaml").read_text())
    fabric = yaml.safe_load((HW / "fabrics" / "ndr_rail_fat_tree.yaml").read_text())
    leaves = [("gpu", k) for k, v in gpu.items() if isinstance(v, (int, float))]
    leaves += [("node", k) for k in ("gpus_per_node", "nics_per_node", "collective_launch_ns")]
    leaves += [("nvlink", k) for k in ("bandwidth_gbps", "latency_ns")]
    leaves += [("fabric", k) for k in ("nic_line_rate_gbit_per_s", "nic_latency_ns",
                                       "oversubscription", "nodes_per_leaf")]  # fmt: skip
    leaves += [("eff", "efficiency")]
    for _ in range(count):
        where, key = rng.choice(leaves)
        value = rng.choice(TYPED)

        def case(where: str = where, key: str = key, value: Any = value) -> str:
            g, n, f = json.loads(json.dumps(gpu)), json.loads(json.dumps(node)), dict(fabric)
            parts = {"gpu": g, "node": n, "nvlink": n["nvlink"], "fabric": f}
            if where == "eff":
                n["nvlink"]["efficiency"][-1][1] = value
            else:
                parts[where][key] = value
            n["gpu"] = g
            path = work / f"hw-{len(os.listdir(work))}.yaml"
            doc = {"name": "x", "node": n, "fabric": f, "num_nodes": 1}
            path.write_text(yaml.safe_dump(doc))
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            finite = number and math.isfinite(value)
            zero_ok = key.endswith(("latency_ns", "_launch_ns"))
            must_fail = not finite or value < 0 or (value == 0 and not zero_ok)
            must_fail |= where == "eff" and finite and value > 1
            run = h.invoke(["estimate", "--model", "llama3.1-8b", "--tp", "8", "--dp", "2",
                            "--hw", str(path)], timeout)  # fmt: skip
            return h.classify(run, must_fail=must_fail)

        yield HARDWARE, case


def api_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
              ) -> Iterator[Case]:  # fmt: skip
    import lumos
    from lumos.errors import LumosError
    from lumos.simulator.workload.plan import ParallelPlan

    kinds = {f: str(t.type) for f, t in ParallelPlan.__dataclass_fields__.items()}
    for _ in range(count):
        field = rng.choice([*kinds, "gpus"])
        value = rng.choice([*TYPED, 1, 2, 8])

        def case(field: str = field, value: Any = value) -> str:
            kind = kinds.get(field, "int | None")
            zero_ok = field in ("etp", "zero") and value == 0
            zero_ok |= field in ("gbs", "seq", "gpus") and value is None  # None: the default
            bad = {"bool": not isinstance(value, bool), "str": not isinstance(value, str)
                   }.get(kind, not _is_count(value) and not zero_ok)  # fmt: skip
            try:
                lumos.estimate("llama3.1-8b", **{field: value})
            except LumosError:
                return "clean error"
            except Exception as exc:
                h.EXAMPLES["traceback"].append(f"api {field}={value!r}: {exc!r}")
                return "traceback"
            return "wrong result" if bad and kind in ("int", "bool") else "ok"

        yield API, case


def output_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                 ) -> Iterator[Case]:  # fmt: skip
    est = ["estimate", "--model", "llama3.1-8b", "--tp", "8"]

    def target(kind: str, d: Path) -> str:
        if kind == "file":
            (d / "f").write_text("x")
            return str(d / "f")
        if kind == "user-file":
            (d / "o").mkdir()
            (d / "o" / "notes.txt").write_text("mine")
            return str(d / "o")
        if kind == "link":
            (d / "real").mkdir()
            os.symlink(d / "real", d / "o")
            return str(d / "o")
        if kind == "foreign":
            (d / "o").mkdir()
            (d / "o" / "estimate.0.et").write_bytes(b"not lumos")
            return str(d / "o")
        return {"empty": "", "dash": "-", "null": "/dev/null", "under-file": str(d / "f" / "x"),
                "new": str(d / "a" / "b")}.get(kind, str(d / "o"))  # fmt: skip

    kinds = ["file", "user-file", "link", "foreign", "empty", "dash", "null", "under-file",
             "new", "twice", "ro", "full"]  # fmt: skip
    for kind in kinds:

        def case(kind: str = kind) -> str:
            d = work / f"out-{kind}"
            d.mkdir()
            if kind == "under-file":
                (d / "f").write_text("x")
            if kind in ("ro", "full"):
                with h.mounted(kind, d) as mnt:
                    if mnt is None:
                        return "skipped"
                    run = h.invoke([*est, "-o", str(mnt / "o")], timeout)
                    return h.classify(run, must_fail=True, leftovers=h.temp_leftovers(mnt))
            out = target(kind, d)
            force = ["--force"] if kind == "foreign" else []
            if kind == "twice":
                h.invoke([*est, "-o", out], timeout)
            run = h.invoke([*est, "-o", out, *force], timeout)
            must_fail = kind not in ("user-file", "link", "new")
            verdict = h.classify(run, must_fail=must_fail, leftovers=h.temp_leftovers(d))
            if kind == "user-file" and (d / "o" / "notes.txt").read_text() != "mine":
                verdict = "wrong result"
            if kind == "foreign" and (d / "o" / "estimate.0.et").read_bytes() != b"not lumos":
                verdict = "wrong result"
            if Path("-").exists() or not Path("/dev/null").is_char_device():
                verdict = "wrong result"
            return verdict

        yield OUTPUTS, case
    for k in range(count):
        sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        yield OUTPUTS, lambda k=k, sig=sig: _kill_case(h, work, rng, k, sig)


def _kill_case(h: ModuleType, work: Path, rng: random.Random, k: int, sig: int) -> str:
    """A 64-rank `--all-ranks` write killed at a random moment: the folder is absent or
    whole; only SIGKILL may leave a hidden staging folder, which the next writer sweeps."""
    d = work / f"kill-{k}"
    d.mkdir()
    args = [fh._lumos(), "estimate", "--model", "llama3.1-8b", "--tp", "8", "--pp", "4",
            "--dp", "2", "--gbs", "64", "--all-ranks", "-o", str(d / "o")]  # fmt: skip
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(rng.uniform(0.3, 4.0))
    child.send_signal(sig)
    try:
        child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        return "hang"
    files = sorted((d / "o").glob("estimate.*.et")) if (d / "o").exists() else []
    if files and len(files) != 64:
        return "partial output"
    hidden = [p for p in d.rglob("*") if "lumos-staging" in p.name or "lumos-tmp" in p.name]
    if hidden and sig != signal.SIGKILL:
        return "partial output"
    if hidden:  # the next writer into the same folder removes what the kill left
        h.invoke(["estimate", "--model", "llama3.1-8b", "-o", str(d / "next")], 60)
        if [p for p in d.iterdir() if "lumos-staging" in p.name]:
            return "partial output"
    return "ok" if child.returncode == 0 else "clean error"


def sweep_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                ) -> Iterator[Case]:  # fmt: skip
    axis = ["1", "2", "1,2", "8", "0", "-1", "1.5", "abc", "", "8,8,8", "1e3", str(10**9),
            ",".join(map(str, range(1, 300)))]  # fmt: skip
    for k in range(count):
        grid = {a: rng.choice(axis) for a in ("tp", "pp", "mbs") if rng.random() < 0.6}
        extra = rng.choice([[], [], ["--workers", "100000"], ["--top", "-1"], ["--zero", "2"],
                            ["--seq", "512,1024"], ["--recompute", "nope"], ["--gpus", "7"],
                            ["--precision", "fp8", "--hw", "a100"], ["journal"], ["foreign"]])  # fmt: skip

        def case(k: int = k, grid: dict[str, str] = grid, extra: list[str] = extra) -> str:
            d = work / f"sweep-{k}"
            d.mkdir()
            table = d / "t.csv"
            args = ["sweep", "--model", "gpt3-125m", "--gpus", "8", "--gbs", "8", "--seq", "512",
                    "--recompute", "none", "--mbs", "1", "-o", str(table)]  # fmt: skip
            if extra != ["journal"]:  # a journal needs one clean run first
                args += [x for a, v in grid.items() for x in (f"--{a}", v)]
            if extra == ["foreign"]:
                table.write_text("mine\n")
            if extra == ["journal"]:
                h.invoke([*args, "--tp", "1", "--pp", "1"], timeout)
                path = d / "t.csv.journal.jsonl"
                raw = bytearray(path.read_bytes())
                for _ in range(rng.randint(1, 8)):
                    raw[rng.randrange(len(raw))] = rng.randrange(256)
                path.write_bytes(bytes(raw))
                args += ["--tp", "1", "--pp", "1"]
            elif extra != ["foreign"]:
                args += extra
            run = h.invoke(args, timeout)
            verdict = h.classify(run, leftovers=h.temp_leftovers(d))
            if run.code == 0 and not table.exists():
                verdict = "wrong result"
            if extra == ["foreign"] and table.read_text() != "mine\n" and run.code == 0:
                verdict = "wrong result"  # replaced a file no sweep wrote, without --force
            return verdict

        yield SWEEPS, case


def bomb_cases(h: ModuleType, work: Path, timeout: float) -> Iterator[Case]:
    root = work / "est-bombs"
    root.mkdir()
    keys = root / "keys.yaml"
    keys.write_text("layers: 4\n" + "".join(f"k{i}: {i}\n" for i in range(2_000_000)))
    hw = root / "slow.yaml"
    node = yaml.safe_load((HW / "nodes" / "hgx_h100.yaml").read_text())
    node["nvlink"]["bandwidth_gbps"] = 1e-300
    hw.write_text(yaml.safe_dump({"name": "x", "node": node, "fabric": "ndr_rail_fat_tree"}))
    wide = root / "wide.yaml"
    wide.write_text("{layers: 4, hidden: 1000000000000, heads: 8, ffn: 2048, vocab: 32000}\n")
    grid = ",".join(map(str, range(1, 201)))
    huge = ",".join(map(str, range(1, 2001)))
    sweep = "sweep --model llama3.1-8b --gpus 64 --gbs 64 --seq 8192"  # paths have no spaces
    made = {
        "estimate: 34 MB model YAML of keys": f"estimate --model {keys}",
        "sweep: 200 x 200 x 200 grid": f"{sweep} --tp {grid} --pp {grid} --mbs {grid} -o {root}/g1",
        "sweep: 2000 x 2000 x 2000 grid": f"{sweep} --tp {huge} --pp {huge} --mbs {huge} -o {root}/g2",
        "sweep: --workers 100000": f"{sweep} --tp 8 --workers 100000 -o {root}/g3.csv",
        "estimate --exact: 65,536 micro-batches": "estimate --model gpt3-125m --gbs 65536 --exact",
        "estimate: NVLink at 1e-300 GB/s": f"estimate --model llama3.1-8b --tp 8 --dp 2 --hw {hw}",
        "estimate: a model of hidden 10^12 (round 3)": f"estimate --model {wide}",
        "estimate: --seq 10^12 (round 3)": "estimate --model gpt3-125m --seq 1000000000000",
        "estimate -o --all-ranks: 131,072 ranks": "estimate --model llama3.1-8b --tp 8 --dp 16384 "
        f"--gbs 16384 --all-ranks -o {root}/all",
    }
    for label, args in made.items():
        yield (
            fh.BOMBS_LABEL,
            lambda label=label, args=args: fh.child(h, label, args.split(), timeout),
        )


def families(
    h: ModuleType, work: Path, rng: random.Random, n: Any, timeout: float, only: str = ""
) -> list[Iterator[Case]]:
    """Every family of this module whose label contains `only`, sized by `n(base)`."""
    made = [
        (PLANS, lambda: plan_cases(h, work, rng, n(80), timeout)),
        (MODELS, lambda: model_cases(h, work, rng, n(60), timeout)),
        (HARDWARE, lambda: hardware_cases(h, work, rng, n(60), timeout)),
        (API, lambda: api_cases(h, work, rng, n(60), timeout)),
        (OUTPUTS, lambda: output_cases(h, work, rng, n(9), timeout)),
        (SWEEPS, lambda: sweep_cases(h, work, rng, n(40), timeout)),
        (fh.BOMBS_LABEL, lambda: bomb_cases(h, work, max(timeout, 60))),
    ]
    return [make() for label, make in made if only in label]
