"""Hostile-input families of the fuzz campaign (issue 11, second audit), used by
`scripts/fuzz_harness.py`: what a hostile but realistic user tries beyond byte noise.

- tar: archives cut at any byte (inside members too), member names with `..` or an
  absolute path, links, devices and FIFOs named as ranks, repeated members, a member
  header claiming 3 GB, a .tar.gz that expands a thousandfold;
- configs: JSON / YAML nested past the recursion limit, YAML alias bombs, Python tags,
  repeated keys, garbage `LUMOS_MAX_*` values, comm-group files of every wrong shape;
- metadata: world sizes and ranks of a billion, malformed `process_groups`;
- kineto / host ET: typed field mutations (NaN, infinities, 1e308, bools, strings,
  lists for `ts`/`dur`/`pid`/`tid`/`args`), parent loops, repeated ids, unknown schema,
  shapes and sizes past 64 bits;
- names: control characters, OSC sequences, rich markup and `<script>` in op names,
  through the terminal tables, the HTML report and the JSON timeline;
- round 3: a Chakra `dur_ns` of -1 (lumos' own "none given"), a future schema version
  (must be noted), a kernel longer than its measured step (must be noted, naming it), a
  symbolic-link loop as the input of every command (must name the loop), `et info` on
  files of two conversions (must fail);
- bombs: each run in a child process under a 2 GiB address-space cap with a wall
  limit; its peak RSS and time are recorded (`BOMBS`), a bomb that succeeds is a wrong
  result.

Each family yields (class label, case) like the harness's own; the harness module is
passed in (`h`) for `invoke`, `classify` and the seeds.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tarfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests" / "data" / "captures" / "ddp"
H100 = (REPO / "hwconfigs" / "systems" / "h100.yaml").read_text()
NETWORK = "topology: [Ring]\nnpus_count: [4]\nbandwidth: [50.0]\nlatency: [500.0]\n"
LAUGHS = (
    "["
    + ", ".join(
        ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    )
    + "]"
)
HOSTILE_NAMES = [
    "<script>alert(1)</script>",
    "[/] [link=file:///etc/passwd]x[/link]",
    "\x1b]52;c;cHduZWQ=\x07\x1b[2J",
    "a\nb\x00c\r\x7f",
    "\u202eevil\u2066",
    'q"uote\\back',
    "n" * 100_000,
    "",
]
TYPED = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, True, False, "12", "x",
         None, [1], {"a": 1}, 10**30, -(10**18), 0, -5]  # fmt: skip

#: (label, peak RSS in KiB, CPU s, wall s, exit code) of every bomb run in a child
BOMBS: list[tuple[str, int, float, float, int]] = []

Case = tuple[str, Any]

TAR = "tar: cut, climbing names, links/devices, repeats, header bombs"
CONFIGS = "configs: nesting, alias bombs, YAML tags, repeated keys, garbage limits"
METADATA = "metadata: malformed process_groups"
KINETO = "kineto: typed field mutations (NaN, inf, bools, strings, huge)"
HOST_ET = "host ET: loops, repeated ids, schema, shapes, sizes, names"
NAMES = "names: control chars, OSC, markup, <script> through every output"
ROUND3 = "round 3: dur_ns -1, future ET versions, overlong kernels, link loops, mixed sets"
BOMBS_LABEL = "bombs: in a 2 GiB child (peak RSS and time below)"


def _lumos() -> str:
    return str(Path(sys.executable).with_name("lumos"))


def child(h: ModuleType, label: str, args: list[str], timeout: float, *, env: dict[str, str]
          | None = None, must_fail: bool = True) -> str:  # fmt: skip
    """Run `lumos ARGS` in a child capped at 2 GiB of address space; record its cost."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    began = time.monotonic()
    try:  # /usr/bin/time reports this child's own peak RSS (RUSAGE_CHILDREN is a max)
        done = subprocess.run(
            ["/usr/bin/time", "-f", "FUZZ-COST %M %U %S", _lumos(), *args], capture_output=True,
            text=True, timeout=timeout, preexec_fn=cap, env={**os.environ, **(env or {})},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        BOMBS.append((label, -1, -1.0, timeout, -1))
        return "hang"
    wall = time.monotonic() - began
    cost = [line for line in done.stderr.splitlines() if line.startswith("FUZZ-COST ")]
    rss, user, system = cost[-1].split()[1:] if cost else ("-1", "-1", "0")
    BOMBS.append((label, int(rss), float(user) + float(system), wall, done.returncode))
    err = "\n".join(
        x for x in done.stderr.splitlines() if not x.startswith(("FUZZ-COST", "Command"))
    )
    run = h.Run(done.returncode, done.stdout + err)
    if "MemoryError" in run.output:
        return h.classify(h.Run(70, run.output))
    return h.classify(run, must_fail=must_fail)


# --- tar ---------------------------------------------------------------------------------


def _tar_bytes(members: list[tuple[str, bytes | None, dict[str, Any]]], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:
        for name, data, fields in members:
            info = tarfile.TarInfo(name)
            for key, value in fields.items():
                setattr(info, key, value)
            if data is None:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def tar_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
              ) -> Iterator[Case]:  # fmt: skip
    seed = h.write_set(work / "tarseed", world=4, n=20)
    ranks = [(seed / f"t.{r}.et").read_bytes() for r in range(4)]
    links = [
        {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"},
        {"type": tarfile.SYMTYPE, "linkname": "t.0.et"},
        {"type": tarfile.LNKTYPE, "linkname": "t.0.et"},
        {"type": tarfile.FIFOTYPE},
        {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 5},
    ]
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"tar{k}"
            folder.mkdir()
            kind = rng.choice(("cut", "climb", "link", "repeat", "huge-header", "gz-cut"))
            names = [f"t.{r}.et" for r in range(4)]
            members: list[tuple[str, bytes | None, dict[str, Any]]] = [
                (n, d, {}) for n, d in zip(names, ranks, strict=True)
            ]
            must_fail = kind != "climb"
            if kind == "climb":
                prefix = rng.choice(("../../", "/tmp/lumos-fuzz-abs/", "a/../../"))
                members = [(prefix + n, d, f) for n, d, f in members]
            elif kind == "link":
                members[rng.randrange(1, 4)] = (names[rng.randrange(1, 4)], None, rng.choice(links))
                members = list({m[0]: m for m in members}.values())
            elif kind == "repeat":
                members.append((rng.choice(("", "x/")) + rng.choice(names), ranks[0], {}))
            raw = _tar_bytes(members, "w:gz" if kind == "gz-cut" else "w")
            data_end = sum(512 + -(-len(d or b"") // 512) * 512 for _, d, _ in members)
            if kind == "cut":
                at = rng.randrange(1, data_end + 2048)
                raw, must_fail = raw[:at], at < data_end
            elif kind == "gz-cut":  # where the members end in the stream is not known
                raw, must_fail = raw[: rng.randrange(1, len(raw))], False
            elif kind == "huge-header":
                info = tarfile.TarInfo("t.3.et")
                info.size = rng.choice((3 << 30, 1 << 40, 10**11))
                three = sum(512 + -(-len(d) // 512) * 512 for d in ranks[:3])
                raw = raw[:three] + info.tobuf(tarfile.GNU_FORMAT) + bytes(2048)
            path = folder / "set.tar"
            path.write_bytes(raw)
            cmd = rng.choice((["et", "validate"], ["simulate"], ["et", "info"],
                              ["export", "astra-sim", "--hw", "h100", "-o", str(folder / "b")]))  # fmt: skip
            args = [*cmd[:2], str(path), *cmd[2:]] if cmd[0] == "export" else [*cmd, str(path)]
            run = h.invoke(args, timeout)
            if cmd == ["et", "info"] and kind in ("link", "cut", "gz-cut") and run.code == 0:
                must_fail = False  # info describes what is there; it refuses nothing
            outside = any(Path(p).exists() for p in ("/tmp/lumos-fuzz-abs", "/t.0.et"))
            left = h.temp_leftovers(folder) + (["escaped the folder"] if outside else [])
            if run.code != 0 and (folder / "b").exists():
                left.append("bundle")
            verdict = h.classify(run, must_fail=must_fail, leftovers=left)
            shutil.rmtree(folder)
            return verdict

        yield TAR, case


# --- configs -----------------------------------------------------------------------------


def config_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                 ) -> Iterator[Case]:  # fmt: skip
    trace = h.write_set(work / "hcfg", world=4, n=10)
    deep = "[" * 50_000 + "]" * 50_000
    tag = "!!python/object/apply:os.system ['touch {marker}']"
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"hc{k}"
            folder.mkdir()
            marker = folder / "pwned"
            kind = rng.choice(("hw", "network", "system", "groups", "env"))
            system = folder / "system.json"
            system.write_text(json.dumps(h.RING_SYSTEM))
            network = folder / "network.yml"
            network.write_text(NETWORK)
            env: dict[str, str] | None = None
            if kind == "hw":
                hw = folder / "hw.yaml"
                key, value = rng.choice(
                    [
                        (k, v)
                        for k in ("name: h100", "all_to_all: direct")
                        for v in (
                            LAUGHS,
                            "[" * 5000 + "]" * 5000,
                            tag.format(marker=marker),
                            "&a [*a]",
                        )
                    ]
                    + [
                        ("num_nodes: 64", v)
                        for v in ("1e999", "99999999999999999999", ".nan", LAUGHS, "[1, 2]")
                    ]
                )  # fmt: skip (every one must be refused)
                field = key.split(":")[0]
                text = H100.replace(key, f"{field}: {value}")
                hw.write_text(text + (f"{field}: 4\n" if rng.random() < 0.2 else ""))
                args = ["simulate", str(trace / "t"), "--hw", str(hw)]
            elif kind in ("network", "system"):
                if kind == "network":
                    value = rng.choice((LAUGHS, "[" * 5000 + "]" * 5000, tag.format(marker=marker)))
                    network.write_text(NETWORK.replace("[Ring]", value))
                else:
                    system.write_text('{"scheduling-policy": ' + deep + "}")
                args = ["simulate", str(trace / "t"), "--astra-sim-system", str(system),
                        "--astra-sim-network", str(network)]  # fmt: skip
            elif kind == "groups":
                groups = folder / "groups.json"
                groups.write_text(rng.choice(
                    ("x", "[[0, 1]]", '{"1": "ab"}', '{"1": [1e999]}', '{"1": [0, -1]}',
                     '{"1": [[0]]}', '{"1": ' + deep + "}")
                ))  # fmt: skip
                args = rng.choice((["simulate", str(trace / "t")],
                                   ["export", "astra-sim", str(trace / "t"), "--hw", "h100",
                                    "-o", str(folder / "b")]))  # fmt: skip
                args = [*args, "--comm-groups", str(groups)]
            else:
                variable = rng.choice(("LUMOS_MAX_RANKS", "LUMOS_MAX_FRAME_BYTES",
                                       "LUMOS_MAX_GZIP_RATIO", "LUMOS_MAX_CHUNKS"))  # fmt: skip
                env = {variable: rng.choice(("abc", "0", "-1", "2.5", "1e400", "nan", "0x10"))}
                args = ["simulate", str(trace / "t")]
            run = _with_env(env, lambda: h.invoke(args, timeout))
            left = h.temp_leftovers(folder) + (["ran a YAML tag"] if marker.exists() else [])
            if run.code != 0 and (folder / "b").exists():
                left.append("bundle")
            verdict = h.classify(run, must_fail=True, leftovers=left)
            shutil.rmtree(folder)
            return verdict

        yield CONFIGS, case


def _with_env(env: dict[str, str] | None, call: Any) -> Any:
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        return call()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- metadata ----------------------------------------------------------------------------


def metadata_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                   ) -> Iterator[Case]:  # fmt: skip
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import with_node_count, write_et
    from lumos.proto import pb

    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"md{k}"
            folder.mkdir()
            groups = rng.choice(
                ("x", "[1, 2]", "[" * 5000 + "]" * 5000, '{"0": "ab"}', '{"0": [0, 1e999]}',
                 '{"0": [-1, 0]}', '{"0": [0, 99999999999999999999999]}', '{"0": [[0]]}')
            )  # fmt: skip
            for r in range(2):
                meta = pb.GlobalMetadata(version="0.0.4")
                meta.attr.extend([make_attr("rank", r), make_attr("world_size", 2),
                                  make_attr("process_groups", groups)])  # fmt: skip
                nodes = h._rank_nodes(r, 10)
                write_et(folder / f"t.{r}.et", with_node_count(meta, len(nodes)), nodes)
            cmd = rng.choice(("validate", "simulate", "export", "info"))
            args = {
                "validate": ["et", "validate", str(folder)],
                "simulate": ["simulate", str(folder / "t")],
                "export": ["export", "astra-sim", str(folder / "t"), "--hw", "h100", "-o",
                           str(folder / "b")],
                "info": ["et", "info", str(folder)],
            }[cmd]  # fmt: skip
            run = h.invoke(args, timeout)
            # simulate and info read past malformed groups (validate names them)
            must_fail = cmd in ("validate", "export")
            left = ["bundle"] if run.code != 0 and (folder / "b").exists() else []
            verdict = h.classify(run, must_fail=must_fail, leftovers=left)
            shutil.rmtree(folder)
            return verdict

        yield METADATA, case


# --- kineto and host ET fields -----------------------------------------------------------


def kineto_field_cases(h: ModuleType, work: Path, rng: random.Random, count: int,
                       timeout: float) -> Iterator[Case]:  # fmt: skip
    docs = [h.kineto_doc(0), h.kineto_doc(1)]
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"kf{k}"
            folder.mkdir()
            doc = copy.deepcopy(docs[0])
            events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
            for event in rng.sample(events, rng.randint(1, 3)):
                key = rng.choice(("ts", "dur", "pid", "tid", "args", "name", "cat"))
                if key == "name":
                    event[key] = rng.choice([*HOSTILE_NAMES, 5, None])
                elif key == "args" and rng.random() < 0.5 and isinstance(event.get("args"), dict):
                    arg = rng.choice(("correlation", "External id", "stream", "device"))
                    event["args"][arg] = rng.choice(TYPED)
                else:
                    event[key] = rng.choice(TYPED)
            try:
                text = json.dumps(doc).encode()  # Python's writer: NaN, Infinity as such
            except (TypeError, ValueError):
                return "skipped"
            (folder / "rank0.kineto.json").write_bytes(text)
            (folder / "rank1.kineto.json").write_bytes(json.dumps(docs[1]).encode())
            out = folder / "out"
            run = h.invoke(["convert", str(folder), "-o", str(out), "--prefix", "t"], timeout)
            left = h.temp_leftovers(folder)
            if run.code != 0 and out.exists():
                left.append(str(out))
            verdict = h.classify(run, leftovers=left)
            if verdict == "ok":
                check = h.invoke(["simulate", str(out / "t"), "--json"], timeout)
                verdict = h.classify(check) if check.code not in (0, 1) else "ok"
            shutil.rmtree(folder)
            return verdict

        yield KINETO, case


def host_et_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                  ) -> Iterator[Case]:  # fmt: skip
    base = json.loads(gzip.decompress((CAPTURE / "rank0.host_et.json.gz").read_bytes()))
    mms = [i for i, n in enumerate(base["nodes"]) if n["name"] == "aten::mm"]
    comms = [i for i, n in enumerate(base["nodes"]) if n["name"].startswith("gloo:")]
    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"he{k}"
            folder.mkdir()
            doc = copy.deepcopy(base)
            nodes = doc["nodes"]
            kind = rng.choice(("loop", "self", "dangling", "repeat-id", "schema", "shape",
                               "comm-size", "name", "rf-collide", "attrs"))  # fmt: skip
            a, b = (nodes[i] for i in rng.sample(mms, 2))
            must_fail = kind in ("loop", "repeat-id")
            if kind == "loop":
                a["ctrl_deps"], b["ctrl_deps"] = b["id"], a["id"]
            elif kind == "self":
                a["ctrl_deps"] = a["id"]
            elif kind == "dangling":
                a["ctrl_deps"] = rng.choice((10**9, -1, 0))
            elif kind == "repeat-id":
                b["id"] = a["id"]
            elif kind == "schema":
                doc["schema"] = rng.choice(("9.9.9", "0.0.1", "1.1.1-chakra.9.9.9", "x", ""))
                must_fail = doc["schema"] in ("x", "", "0.0.1")
            elif kind == "shape":
                a["inputs"]["shapes"] = rng.choice(
                    ([[10**12, 10**12], [10**12, 10**12]], [[-1, 5], [5, -1]], [["a"], [None]],
                     json.loads("[" * 400 + "]" * 400), "x")
                )  # fmt: skip
            elif kind == "comm-size":
                c = nodes[rng.choice(comms)]
                size = rng.choice((10**19, -5, 10**15))
                c["inputs"]["shapes"], c["inputs"]["values"][0][3] = [[size]], size
                must_fail = size == 10**19
            elif kind == "name":
                a["name"] = rng.choice(HOSTILE_NAMES)
            elif kind == "rf-collide":
                for node in nodes:
                    for attr in node.get("attrs", []):
                        if attr["name"] == "rf_id":
                            attr["value"] = rng.choice((7, attr["value"] % 3))
            else:
                a["attrs"] = rng.choice(("x", [1], [{"name": "rf_id"}], None))
            (folder / "rank0.host_et.json").write_text(json.dumps(doc))
            if kind != "comm-size" and rng.random() < 0.5:  # with Kineto, sizes come from it
                shutil.copy(CAPTURE / "rank0.kineto.json.gz", folder)
            out = folder / "out"
            run = h.invoke(["convert", str(folder), "-o", str(out)], timeout)
            left = h.temp_leftovers(folder)
            if run.code != 0 and out.exists():
                left.append(str(out))
            verdict = h.classify(run, must_fail=must_fail, leftovers=left)
            shutil.rmtree(folder)
            return verdict

        yield HOST_ET, case


# --- names through every output ----------------------------------------------------------


def name_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
               ) -> Iterator[Case]:  # fmt: skip
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import with_node_count, write_et
    from lumos.proto import pb

    for k in range(count):

        def case(k: int = k) -> str:
            folder = work / f"nm{k}"
            folder.mkdir()
            picked = rng.sample(HOSTILE_NAMES, 3)
            for r in range(2):
                meta = pb.GlobalMetadata(version="0.0.4")
                meta.attr.extend([make_attr("rank", r), make_attr("world_size", 2),
                                  make_attr("process_groups", json.dumps({picked[2]: [0, 1]}))])  # fmt: skip
                nodes = h._rank_nodes(r, 12)
                for node in nodes:
                    if node.type == pb.COMP_NODE:
                        node.name = picked[node.id % 2]
                    else:
                        node.attr.append(make_attr("pg_name", picked[2]))
                write_et(folder / f"t.{r}.et", with_node_count(meta, len(nodes)), nodes)
            cmd = rng.choice(("simulate", "info", "graph", "export"))
            args = {
                "simulate": ["simulate", str(folder / "t"), "--plot", str(folder / "p"),
                             "--timeline", str(folder / "tl.json")],
                "info": ["et", "info", str(folder)],
                "graph": ["et", "graph", str(folder / "t"), "-o",
                          str(folder / rng.choice(("g.dot", "g.graphml")))],
                "export": ["export", "astra-sim", str(folder / "t"), "--hw", "h100", "-o",
                           str(folder / "b")],
            }[cmd]  # fmt: skip
            run = h.invoke(args, timeout)
            verdict = h.classify(run, leftovers=h.temp_leftovers(folder))
            if verdict == "ok" and _unsafe(folder, run.output):
                verdict = "wrong result"
                h.EXAMPLES[verdict].append(f"unsafe output of {cmd}: {sorted(picked)!r:.200}")
            shutil.rmtree(folder)
            return verdict

        yield NAMES, case


def _unsafe(folder: Path, terminal: str) -> bool:
    """A control character on the terminal, a live `<script>` in a page, or a JSON / XML
    output that no longer parses."""
    if any(c in terminal for c in ("\x1b", "\x00", "\x07", "\u202e")):
        return True
    for page in folder.glob("*.html"):
        if "<script>alert" in page.read_text(errors="replace"):
            return True
    import xml.etree.ElementTree as ET

    try:
        for path in folder.glob("*.json"):
            json.loads(path.read_text())
        for path in folder.glob("*.graphml"):
            ET.parse(path)
    except (ValueError, ET.ParseError):
        return True
    return False


# --- bombs, each in a capped child ---------------------------------------------------------


def bomb_cases(h: ModuleType, work: Path, timeout: float) -> Iterator[Case]:
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import with_node_count, write_et
    from lumos.converters.chakra.varint import encode_varint
    from lumos.proto import pb

    root = work / "bombs"
    root.mkdir()
    head = pb.GlobalMetadata(version="0.0.4").SerializeToString()

    def gz(path: Path, parts: Iterator[bytes]) -> Path:
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)
        with open(path, "wb") as f:
            for part in parts:
                f.write(packer.compress(part))
            f.write(packer.flush())
        return path

    def zeros(n: int, block: int = 64 << 20) -> Iterator[bytes]:
        while n > 0:
            yield bytes(min(n, block))
            n -= block

    made: dict[str, list[str]] = {}
    (root / "frame").mkdir()
    gz(root / "frame" / "t.0.et.gz",
       iter([encode_varint(len(head)) + head + encode_varint(3 << 30), *zeros(3 << 30)]))  # fmt: skip
    made["et.gz: one 3 GB frame"] = ["simulate", str(root / "frame" / "t"), "--allow-partial"]
    (root / "frame2").mkdir()
    shutil.copy(root / "frame" / "t.0.et.gz", root / "frame2" / "t.0.et.gz")
    made["et.gz: one 3 GB frame, gzip limit raised"] = [
        "simulate", str(root / "frame2" / "t"), "--allow-partial"]  # fmt: skip
    (root / "zeros").mkdir()
    (root / "zeros" / "t.0.et").write_bytes(
        encode_varint(len(head)) + head + encode_varint(8 << 20) + bytes(8 << 20)
    )
    made["et: one 8 MB node of zero bytes"] = ["simulate", str(root / "zeros" / "t")]
    (root / "tiny").mkdir()
    tiny = pb.Node(name="k", type=pb.COMP_NODE, duration_micros=1).SerializeToString()
    with open(root / "tiny" / "t.0.et", "wb") as f:  # 9 million ~12-byte nodes, 115 MB
        f.write(encode_varint(len(head)) + head)
        for block in range(9):
            ids = range(block * 1_000_000 + 1, (block + 1) * 1_000_000 + 1)
            bodies = (b"\x08" + encode_varint(i) + tiny for i in ids)
            f.write(b"".join(encode_varint(len(b)) + b for b in bodies))
    made["et: 9 million ~12-byte nodes (115 MB)"] = ["simulate", str(root / "tiny" / "t")]
    (root / "stated").mkdir()  # round 4: the same nodes, their count in the metadata
    stated = with_node_count(pb.GlobalMetadata(version="0.0.4"), 9_000_000).SerializeToString()
    with open(root / "tiny" / "t.0.et", "rb") as src, open(root / "stated" / "t.0.et", "wb") as f:
        src.seek(len(encode_varint(len(head))) + len(head))
        f.write(encode_varint(len(stated)) + stated)
        shutil.copyfileobj(src, f)
    made["et: 9 million nodes, node_count stated (round 4)"] = [
        "simulate", str(root / "stated" / "t")]  # fmt: skip
    for name, world in (("world", 10**9), ("rank", None)):
        folder = root / name
        folder.mkdir()
        for r in (0, 10**9) if world is None else (0, 1):
            meta = pb.GlobalMetadata(version="0.0.4")
            if world is not None:
                meta.attr.extend([make_attr("rank", r), make_attr("world_size", world)])
            nodes = h._rank_nodes(r, 5)
            write_et(folder / f"t.{r}.et", with_node_count(meta, len(nodes)), nodes)
        made[f"et set: {'world_size 1e9' if world else 'a file named t.1000000000.et'}"] = [
            "simulate", str(folder / "t"), "--allow-partial"]  # fmt: skip
    (root / "kin").mkdir()
    for r in (0, 1):
        doc = h.kineto_doc(r)
        doc["distributedInfo"]["world_size"] = 10**9
        (root / "kin" / f"rank{r}.kineto.json").write_text(json.dumps(doc))
    made["kineto: world_size 1e9"] = ["convert", str(root / "kin"), "-o", str(root / "o1")]
    (root / "jgz").mkdir()
    gz(root / "jgz" / "rank0.kineto.json.gz",
       iter([b'{"traceEvents":[', *(b" " * len(z) for z in zeros(2 << 30)), b"]}"]))  # fmt: skip
    made["json.gz: 2 MB expanding to 2 GB"] = ["convert", str(root / "jgz"), "-o", str(root / "o2")]
    info = tarfile.TarInfo("t.1.et")
    info.size = 2 << 30
    gz(root / "bomb.tar.gz", iter([info.tobuf(tarfile.GNU_FORMAT), *zeros(info.size + 1024)]))
    made["tar.gz: a 2 GB member"] = ["simulate", str(root / "bomb.tar.gz")]
    system = root / "system.json"
    system.write_text(json.dumps({**h.RING_SYSTEM, "active-chunks-per-dimension": 10**9}))
    network = root / "network.yml"
    network.write_text(NETWORK.replace("[4]", "[2]"))
    h.write_set(root / "small", world=2, n=10)
    made["astra system: active-chunks 1e9"] = [
        "simulate", str(root / "small" / "t"), "--astra-sim-system", str(system),
        "--astra-sim-network", str(network)]  # fmt: skip
    hw = root / "hw.yaml"
    hw.write_text(H100.replace("name: h100", f"name: {LAUGHS}"))
    made["hw yaml: billion laughs"] = ["simulate", str(root / "small" / "t"), "--hw", str(hw)]
    made["estimate: dp 1e9"] = ["estimate", "--model", "gpt3-175b", "--tp", "8", "--dp",
                                "1000000000"]  # fmt: skip
    made["estimate: gbs 1e9"] = ["estimate", "--model", "gpt3-175b", "--tp", "8", "--gbs",
                                 "1000000000"]  # fmt: skip
    for label, args in made.items():
        env = {"LUMOS_MAX_GZIP_RATIO": "100000"} if "raised" in label else None

        def case(label: str = label, args: list[str] = args, env: Any = env) -> str:
            return child(h, label, args, timeout, env=env)

        yield BOMBS_LABEL, case


def round3_cases(h: ModuleType, work: Path, rng: random.Random, count: int, timeout: float
                 ) -> Iterator[Case]:  # fmt: skip
    """Round 2's leftovers: each case is wrong unless refused, or noted in the output."""
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import with_node_count, write_et
    from lumos.proto import pb

    def one_set(tag: str, edit: Any, version: str = "0.0.4", step: int | None = None) -> Path:
        folder = work / f"r3-{tag}-{len(os.listdir(work))}"
        folder.mkdir()
        for r in range(2):
            meta = pb.GlobalMetadata(version=version)
            meta.attr.extend([make_attr("rank", r), make_attr("world_size", 2)])
            if step is not None:
                meta.attr.append(make_attr("measured_step_ns", step))
            nodes = h._rank_nodes(r, 10)
            if r == 0:
                edit(nodes)
            write_et(folder / f"t.{r}.et", with_node_count(meta, len(nodes)), nodes)
        return folder

    def minus_one(nodes: list[Any]) -> None:
        node = rng.choice(nodes)
        for a in node.attr:
            if a.name == "dur_ns":
                a.int64_val = -1

    def overlong(nodes: list[Any]) -> None:
        node = rng.choice([n for n in nodes if n.type == pb.COMP_NODE])
        node.duration_micros = rng.choice([10**6, 10**9, 10**15])
        for a in node.attr:
            if a.name == "dur_ns":
                a.int64_val = node.duration_micros * 1000

    def expect(args: list[str], must_fail: bool, says: str) -> str:
        run = h.invoke(args, timeout)
        verdict = h.classify(run, must_fail=must_fail)
        return (
            "wrong result"
            if verdict in ("ok", "clean error") and says not in run.output
            else verdict
        )

    loop = work / "r3-loop"
    if not loop.is_symlink():
        os.symlink(work / "r3-loop2", loop)
        os.symlink(loop, work / "r3-loop2")
    loop_commands = [["simulate"], ["compare"], ["et", "info"], ["et", "validate"],
                     ["et", "to-json"], ["whatif", "--dp", "2"]]  # fmt: skip
    for k in range(count):
        kind = k % 5
        if kind == 0:
            yield (
                ROUND3,
                lambda: expect(
                    ["simulate", str(one_set("dur", minus_one))], True, "dur_ns is negative (-1)"
                ),
            )
        elif kind == 1:
            version = rng.choice(["9.9.9", "2.0.0", "0.0.5", "x"])
            yield (
                ROUND3,
                lambda v=version: expect(
                    ["simulate", str(one_set("ver", lambda n: None, v))],
                    False,
                    "is not one lumos knows",
                ),
            )
        elif kind == 2:
            yield ROUND3, lambda: expect(
                ["simulate", str(one_set("long", overlong, step=4_000_000))], False,
                "longer than the rank's whole measured step")  # fmt: skip
        elif kind == 3:
            command = rng.choice(loop_commands)
            args = [*command[:2], str(loop), *command[2:]] if command[0] == "et" else [
                command[0], str(loop), *command[1:]]  # fmt: skip
            yield ROUND3, lambda a=args: expect(a, True, "a symbolic link loop")
        else:

            def mixed() -> str:
                folder = h.write_set(work / f"r3-mixed-{len(os.listdir(work))}", 4, 10, "a")
                h.write_set(folder / "b", 4, 10, "b")
                shutil.copy(folder / "b" / f"t.{rng.randrange(4)}.et", folder / "t.1.et")
                return expect(["et", "info", str(folder)], True, "different conversions")

            yield ROUND3, mixed


def families(
    h: ModuleType, work: Path, rng: random.Random, n: Any, timeout: float, only: str = ""
) -> list[Iterator[Case]]:
    """Every family of this module whose label contains `only`, sized by `n(base)`."""
    made = [
        (TAR, lambda: tar_cases(h, work, rng, n(300), timeout)),
        (CONFIGS, lambda: config_cases(h, work, rng, n(250), timeout)),
        (METADATA, lambda: metadata_cases(h, work, rng, n(120), timeout)),
        (KINETO, lambda: kineto_field_cases(h, work, rng, n(300), timeout)),
        (HOST_ET, lambda: host_et_cases(h, work, rng, n(60), timeout)),
        (NAMES, lambda: name_cases(h, work, rng, n(150), timeout)),
        (ROUND3, lambda: round3_cases(h, work, rng, n(50), timeout)),
        (BOMBS_LABEL, lambda: bomb_cases(h, work, max(timeout, 60))),
    ]
    return [make() for label, make in made if only in label]


def print_bombs() -> None:
    """The bomb runs: peak RSS, CPU and wall seconds, exit code."""
    if not BOMBS:
        return
    print("\n| bomb | exit | peak RSS | CPU s | wall s |\n|---|---|---|---|---|")
    for label, rss, cpu, wall, code in BOMBS:
        print(f"| {label} | {code} | {rss / 1024:.0f} MiB | {cpu:.2f} | {wall:.2f} |")
