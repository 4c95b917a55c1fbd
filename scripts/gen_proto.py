"""Regenerate lumos's Chakra bindings (proto/et_def_pb2.py, .pyi) from proto/et_def.proto.

Needs grpcio-tools (the dev extra pins the version whose protoc made the committed files).
Usage: python scripts/gen_proto.py [OUT_DIR]   (default: proto/, in place)
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parents[1] / "proto"


def generate(out_dir: Path) -> None:
    """Run protoc on et_def.proto, writing the Python module and its type stub."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        "et_def.proto",
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_DIR)
