"""gloo runs a rank's collectives on two worker threads, which may start them in another
order than they were issued: rank 1 below starts bucket B's all-reduce before bucket A's.
Numbered by start time the ranks' collectives no longer match (the what-if grid's seq128
run 5 could not be simulated: "collective #1 of group [0, 1] differs"); numbered in issue
order (record-function ids, handed out when the call enqueues the work) they do.
"""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from tests.converters.pytorch.kineto_snippet import PID, TID, Snippet, _x

WORKERS = (TID + 1, TID + 2)


def _rank(b_first: bool) -> Snippet:
    k = Snippet()
    k.step(2, 1000.0, 500.0)
    k.op("c10d::allreduce_", 1010.0, 20.0, rf=10)  # bucket A (66048 floats)
    k.op("c10d::allreduce_", 1040.0, 20.0, rf=20)  # bucket B (82304 floats)
    starts = {11: 1100.0, 21: 1070.0} if b_first else {11: 1035.0, 21: 1070.0}
    for rf, dims, tid in ((11, 66048, WORKERS[0]), (21, 82304, WORKERS[1])):
        args = {"External id": rf, "Record function id": rf, "Input Dims": [[dims]]}
        args |= {"Input type": ["float"]}
        k.events.append(_x("user_annotation", "gloo:all_reduce", PID, tid, starts[rf], 150.0, args))
    k.op("aten::as_strided", 1300.0, 5.0)
    return k


def test_gloo_collectives_are_numbered_in_issue_order(tmp_path: Path) -> None:
    paths = [_rank(b_first).write(tmp_path / f"r{r}.json.gz") for r, b_first in enumerate((0, 1))]
    out = tmp_path / "et"
    for rank, path in enumerate(paths):
        convert([path], out / str(rank), prefix="t")
    seqs = []
    for rank in range(2):
        _, nodes = read_et(next((out / str(rank)).glob("t.*.et")))
        colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
        seqs.append({get_attr(n, "comm_size"): get_attr(n, cv.COMM_SEQ) for n in colls})
    assert seqs[0] == seqs[1] == {66048 * 4: 0, 82304 * 4: 1}
