"""ASTRA-sim's load and finish rules applied to what lumos's astra mode is asked to time.

The export pre-flight (`lumos.converters.astra_sim.preflight`) holds the rules whose breach
makes the real binary throw, hang or report a 0-cycle run; `lumos export astra-sim-check`
runs them on a bundle, and astra mode runs the same ones on its input, so astra mode never
prints a time for a workload the binary cannot finish (e.g. collectives without
`comm_size`, as in ASTRA-sim's own resnet_dp.tar).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lumos.errors import ExportError, ValidationError
from lumos.simulator.network.astra import AstraPricer


def check_binary_rules(
    workload: str | Path, pricer: object, comm_groups: Mapping[str, Sequence[int]] | None
) -> None:
    """Refuse what the real binary cannot finish, by the export pre-flight's own rules.

    Only when the pricer is an AstraPricer (its configs are the binary's). Raises
    ValidationError listing every problem.
    """
    if not isinstance(pricer, AstraPricer):
        return
    from lumos.converters.astra_sim.groups import stoi
    from lumos.converters.astra_sim.preflight import preflight_workload

    groups: dict[int, tuple[int, ...]] = {}
    for key, ranks in (comm_groups or {}).items():
        gid = stoi(str(key))
        if gid is not None and gid >= 0:  # the binary reads a user's group "0" too
            groups[gid] = tuple(sorted(int(r) for r in ranks))
    try:
        preflight_workload(workload, pricer.network, pricer.system, groups)
    except ExportError as exc:
        raise ValidationError(
            [str(exc)], header="ASTRA-sim would not finish this workload"
        ) from None
