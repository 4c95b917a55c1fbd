"""`lumos --help` / `--version` import no command module and no heavy dependency."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from lumos.cli.main import COMMANDS, cli

HEAVY = (
    "numpy",
    "networkx",
    "rich",
    "yaml",
    "google.protobuf",
    "lumos.simulator",
    "lumos.converters",
)


def _modules_after(args: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from lumos.cli.main import cli\n"
        "try:\n"
        f"    cli({args!r}, standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\n'.join(sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_help_and_version_import_nothing_heavy() -> None:
    for args in (["--help"], ["--version"]):
        loaded = _modules_after(args)
        assert not [m for m in loaded if m.startswith(HEAVY)], args


def test_a_command_imports_its_module_on_use() -> None:
    loaded = _modules_after(["et", "--help"])
    assert "lumos.cli.et" in loaded and "lumos.cli.simulate" not in loaded


def test_every_listed_command_resolves_with_the_listed_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name, (_, _, short) in COMMANDS.items():
        assert name in result.output and short in result.output
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0, (name, sub.output)
