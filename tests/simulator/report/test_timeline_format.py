"""The Perfetto outputs follow the Chrome trace-event format rules, with peers and paths.

Runs the real pipeline on the bundled DDP capture (2 ranks, 4 gloo all-reduces each):
`lumos simulate --timeline` (per-rank slices, peer arrows, a critical-path track) and
`lumos compare --timeline` (measured and simulated side by side).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from tests.conftest import DATA

METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


@pytest.fixture(scope="module")
def ets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tl") / "ets"
    lumos.convert(DATA / "captures" / "ddp", out)
    return out


def check_trace_event_format(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert the trace-event format rules Perfetto relies on; returns the events."""
    events = doc["traceEvents"]
    named: set[tuple[int, int]] = set()
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in events:
        assert e["ph"] in {"X", "M", "s", "f"}, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert e["name"] in METADATA and isinstance(e["args"], dict), e
            if e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
        elif e["ph"] == "X":
            assert isinstance(e["name"], str) and e["ts"] >= 0 and e["dur"] >= 0, e
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        else:
            assert e["ph"] not in flows[e["id"]], f"flow id {e['id']} has two {e['ph']}"
            flows[e["id"]][e["ph"]] = e
    assert set(slices) <= named, "every track with slices is named"
    for track in slices.values():  # a processor runs one node at a time
        track.sort()
        ends = [e for _, e in track]
        starts = [s for s, _ in track]
        assert all(s2 >= e1 - 1e-3 for s2, e1 in zip(starts[1:], ends[:-1], strict=True))
    for pair in flows.values():
        assert set(pair) == {"s", "f"}, pair
        s, f = pair["s"], pair["f"]
        assert f["bp"] == "e" and f["ts"] >= s["ts"]
        for end in (s, f):  # each end binds to a slice on its own track
            track = slices[(end["pid"], end["tid"])]
            assert any(a <= end["ts"] <= b for a, b in track), end
    return events


def test_simulate_timeline_has_peers_critical_path_and_args(ets: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    run = CliRunner().invoke(cli, ["simulate", str(ets), "--timeline", str(out)])
    assert run.exit_code == 0, run.output
    events = check_trace_event_format(orjson.loads(out.read_bytes()))
    peers = [e for e in events if e.get("cat") == "peer"]
    assert len(peers) == 2 * 4  # 4 all-reduces over 2 ranks: one arrow each, s + f
    assert all(s["pid"] != f["pid"] for s, f in zip(peers[::2], peers[1::2], strict=True))
    comm = [e for e in events if e["ph"] == "X" and "collective" in e["args"]]
    assert len(comm) == 8
    assert all(e["args"]["bytes"] > 0 and e["args"]["group_ranks"] == [0, 1] for e in comm)
    assert all("wait_for_peers_ns" in e["args"] for e in comm)
    path = [e for e in events if e.get("cat") == "critical_path"]
    sim = lumos.simulate(ets)
    total = sum(e["dur"] for e in path) * 1000
    assert sim.report.critical_path is not None
    assert total == pytest.approx(sim.report.critical_path.total_ns, abs=len(path))


def test_compare_timeline_puts_both_sides_in_one_file(ets: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json.gz"
    run = CliRunner().invoke(cli, ["compare", str(ets), "--timeline", str(out)])
    assert run.exit_code == 0, run.output
    import gzip

    events = check_trace_event_format(orjson.loads(gzip.decompress(out.read_bytes())))
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(processes.values()) == ["measured", "simulated"]
    tracks: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["name"] == "thread_name":
            tracks[processes[e["pid"]]].add(e["args"]["name"])
    assert (
        tracks["measured"] == tracks["simulated"] and "rank 1 · thread 7855" in tracks["measured"]
    )
    count = defaultdict(int)
    for e in events:
        if e["ph"] == "X":
            count[processes[e["pid"]]] += 1
    assert count["simulated"] == 8096 and 0 < count["measured"] <= 8096
