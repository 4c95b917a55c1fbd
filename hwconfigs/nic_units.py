"""A NIC line rate that may have been written in GB/s where its key says Gb/s.

`nic_line_rate_gbit_per_s` is in gigabits a second as NICs are marketed (400 for NDR). The
same rate written in gigabytes a second (50) is 8x too slow and still inside the band real
hardware has (`fields.within`: 1 to 100,000 Gb/s), so the band cannot refuse it; nor can
anything else without refusing real hardware, since 25, 50 and 100 Gb/s NICs exist. What
can be said is when a value reads naturally as a known line rate in GB/s:

* the value x 8 is a known line rate (`LINE_RATES_GBIT`) and the value itself is not one
  (12.5 is 100 Gb/s in GB/s; no NIC runs at 12.5 Gb/s), or
* both readings are known rates (50: 50 GbE, or NDR 400 in GB/s) and, read as Gb/s, the
  node's NIC bandwidth a GPU is below 1/`NVLINK_RATIO_LIMIT` of its NVLink a GPU.

The loader then warns, naming the value and both readings, and prices the value as Gb/s.
"""

from __future__ import annotations

import logging

from lumos.hwconfigs.schema import FabricSpec, NodeSpec

log = logging.getLogger(__name__)

#: line rates of one NIC port, Gb/s: Ethernet 10/25/40/50/100/200/400/800 (IEEE 802.3),
#: InfiniBand 4x FDR 56, EDR 100, HDR 200, NDR 400, XDR 800 (IBTA roadmap), and 1.6 Tb/s
#: (NVIDIA ConnectX-9 SuperNIC)
LINE_RATES_GBIT = (10.0, 25.0, 40.0, 50.0, 56.0, 100.0, 200.0, 400.0, 800.0, 1600.0)
#: NVLink over NIC bandwidth a GPU, per direction, past which a Gb/s reading is suspect:
#: twice the lowest ratio of NVIDIA's reference designs — DGX-1 V100, 150 GB/s NVLink over
#: 4 EDR NICs for 8 GPUs (6.25 GB/s): 24 (DGX-1 V100 system architecture white paper);
#: DGX A100 300 / 25 = 12, DGX H100 450 / 50 = 9. A GB/s value read as Gb/s puts a real
#: design at 72-192
NVLINK_RATIO_LIMIT = 48.0


def _known(rate: float) -> bool:
    return any(abs(rate - r) < 1e-9 * r for r in LINE_RATES_GBIT)


def nic_units_warning(node: NodeSpec, fabric: FabricSpec, where: str) -> str | None:
    """The warning to give when `fabric`'s NIC line rate reads as GB/s (module doc), else
    None."""
    rate = fabric.nic_line_rate_gbit_per_s
    if not _known(rate * 8):
        return None
    per_gpu = rate / 8 * node.nics_per_node / node.gpus_per_node
    ratio = node.nvlink.bandwidth_gbps / per_gpu
    if _known(rate) and ratio <= NVLINK_RATIO_LIMIT:
        return None
    return (
        f"{where}: nic_line_rate_gbit_per_s {rate:g} is priced as {rate:g} Gb/s "
        f"({per_gpu:g} GB/s a GPU, 1/{ratio:.0f} of its NVLink); if it was written in GB/s "
        f"it is {rate * 8:g} Gb/s, 8x faster: write the line rate in Gb/s "
        "(docs/hardware.md, Configs)"
    )


def warn_nic_units(node: NodeSpec, fabric: FabricSpec, where: str) -> None:
    """Log `nic_units_warning` if there is one."""
    if message := nic_units_warning(node, fabric, where):
        log.warning("%s", message)
