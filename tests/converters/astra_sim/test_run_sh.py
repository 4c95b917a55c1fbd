"""A bundle's run.sh writes nothing into the bundle and takes any folder name.

ASTRA-sim writes (and appends to) `log/log.log` and `log/err.log` in its working folder
unless told `--logging-folder`; run.sh used to `cd` into the bundle and let it, so a
read-only bundle could not run and a rerun mixed its logs with the last run's. The
bundle's folder is also found from `$0`, which may hold spaces, `$`, `;`, backticks,
quotes, a newline or a leading `-`.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import fixture_path
from tests.converters.astra_sim.test_export import MICRO, all_reduce, export, write_trace

UNAWARE = "congestion-unaware"
#: a folder name holding every character a shell treats specially, a newline last
HOSTILE = "-a b$HOME;`touch PWNED`'\"\n"


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")}


def _run(script: str, cwd: Path, binary: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "ASTRA_SIM_LOG_DIR"}
    full.update(ASTRA_SIM_BIN=binary, **env)
    return subprocess.run(
        ["bash", "--", script], cwd=cwd, capture_output=True, text=True, env=full, check=False
    )


def _fake_binary(folder: Path) -> Path:
    """Stands in for ASTRA-sim where it is not built: makes its logging folder (default
    `log`, relative to its working folder) as the binary does, and finishes two ranks.
    Like the binary's option parser (cxxopts), it reads the folder from the argument after
    `--logging-folder`: cxxopts does not match `--name=value` when the value holds a
    newline, and the real binary then logs to `log/` again."""
    fake = folder / "fake_astra.sh"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        "logs=log\n"
        "prev=\n"
        'for a in "$@"; do [ "$prev" = --logging-folder ] && logs=$a; prev=$a; done\n'
        'mkdir -p -- "$logs" && echo run >> "$logs/log.log" || exit 9\n'
        'ls -- "workload/${1#--workload-configuration=workload/}".0.et >/dev/null || exit 8\n'
        'echo "sys[0] finished, 10 cycles, exposed communication 10 cycles."\n'
        'echo "sys[1] finished, 12 cycles, exposed communication 12 cycles."\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


def test_run_sh_leaves_the_bundle_as_it_was_and_logs_where_named(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """Real binary: before, every run added `log/` to the bundle (and appended to it)."""
    bundle = tmp_path / "b"
    export(fixture_path(MICRO.format(kind="all_reduce", n=4)), bundle)
    before = _listing(bundle)
    named = _run("b/run.sh", tmp_path, astra_bin[UNAWARE], ASTRA_SIM_LOG_DIR="logs")
    assert named.returncode == 0, named.stderr
    assert "all 4 ranks finished; step time 4897 ns" in named.stdout
    assert (tmp_path / "logs" / "log.log").stat().st_size > 0
    assert _listing(bundle) == before
    again = _run("b/run.sh", tmp_path, astra_bin[UNAWARE], ASTRA_SIM_LOG_DIR="logs")
    assert again.returncode == 2
    assert "logs holds an earlier run's logs" in again.stderr
    default = _run(str(bundle / "run.sh"), tmp_path, astra_bin[UNAWARE])
    assert default.returncode == 0, default.stderr
    where = default.stderr.split("run.sh: ASTRA-sim logs in ")[1].splitlines()[0]
    assert (Path(where) / "log.log").stat().st_size > 0
    assert not Path(where).is_relative_to(bundle) and _listing(bundle) == before


def test_run_sh_in_a_folder_named_with_shell_syntax_runs_the_real_binary(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """A leading `-` made `dirname` read the name as an option; a trailing newline was
    stripped by `$(dirname ...)`, so `cd` went to a folder that does not exist."""
    bundle = tmp_path / HOSTILE
    export(fixture_path(MICRO.format(kind="all_reduce", n=4)), bundle)
    before = _listing(bundle)
    done = _run(f"{HOSTILE}/run.sh", tmp_path, astra_bin[UNAWARE], ASTRA_SIM_LOG_DIR=HOSTILE + "l")
    assert done.returncode == 0, done.stderr
    assert "all 4 ranks finished; step time 4897 ns" in done.stdout
    assert (tmp_path / (HOSTILE + "l") / "log.log").is_file()
    assert _listing(bundle) == before and not list(tmp_path.rglob("PWNED"))


def test_run_sh_takes_hostile_folder_names_without_the_binary(tmp_path: Path) -> None:
    """The same through a stand-in binary, for machines without ASTRA-sim built; the
    prefix too holds shell syntax."""
    prefix = "p$(touch PWNED);`x` 'q\""
    trace = write_trace(tmp_path / "in", [[all_reduce(1)], [all_reduce(1)]], prefix=prefix)
    bundle = tmp_path / HOSTILE
    export(trace, bundle)
    assert subprocess.run(["bash", "-n", str(bundle / "run.sh")], check=False).returncode == 0
    fake = str(_fake_binary(tmp_path))
    before = _listing(bundle)
    for script, cwd in ((f"{HOSTILE}/run.sh", tmp_path), ("run.sh", bundle)):
        done = _run(script, cwd, fake, ASTRA_SIM_LOG_DIR=str(tmp_path / f"{HOSTILE}{cwd.name}"))
        assert done.returncode == 0, done.stderr
        assert "all 2 ranks finished; step time 12 ns" in done.stdout
        assert _listing(bundle) == before
    assert not list(tmp_path.rglob("PWNED"))


def test_run_sh_runs_a_read_only_bundle(astra_bin: dict[str, str], tmp_path: Path) -> None:
    """ASTRA-sim's Chakra feeder opens each ET in append mode ("a+"): on a read-only
    mount it aborted with `Failed to open file workload/all_reduce.0.et` (exit 134), with
    or without the logs moved out. run.sh now runs a temporary copy. Needs a read-only
    bind mount (root); skipped where one cannot be made."""
    bundle, mounted = tmp_path / "b", tmp_path / "ro"
    export(fixture_path(MICRO.format(kind="all_reduce", n=4)), bundle)
    mounted.mkdir()
    made = subprocess.run(["mount", "--bind", str(bundle), str(mounted)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"no bind mount here: {made.stderr.decode().strip()}")
    try:
        remount = ["mount", "-o", "remount,bind,ro", str(mounted)]
        if subprocess.run(remount, capture_output=True).returncode != 0:
            pytest.skip("no read-only remount here")
        temp = tmp_path / "temp"
        temp.mkdir()
        binary = astra_bin[UNAWARE]
        done = _run(
            str(mounted / "run.sh"), tmp_path, binary, ASTRA_SIM_LOG_DIR="l", TMPDIR=str(temp)
        )
    finally:
        subprocess.run(["umount", str(mounted)], check=False)
    assert done.returncode == 0, done.stderr
    assert "all 4 ranks finished; step time 4897 ns" in done.stdout
    assert "the bundle is read-only; running a temporary copy of it" in done.stderr
    assert (tmp_path / "l" / "log.log").is_file() and not list(temp.iterdir())  # copy removed
