"""The wheel ships every module and data file: installed outside the source tree, it runs
convert -> simulate -> export on the bundled capture."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from tests.conftest import DATA, REPO


def test_wheel_installed_outside_the_tree_runs_the_pipeline(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    assert "SetuptoolsDeprecationWarning" not in build.stderr + build.stdout
    (wheel,) = dist.glob("lumos-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    site = next(env_dir.glob("lib/python*/site-packages"))
    # the dependencies come from the test's own environment, lumos only from the wheel
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    lumos = [str(env_dir / "bin" / "python"), "-c", "from lumos.cli.main import main; main()"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str) -> str:
        out = subprocess.run([*lumos, *args], capture_output=True, text=True, cwd=work, env=env)
        assert out.returncode == 0, (args, out.stderr[-2000:])
        return out.stdout

    where = subprocess.run(
        [
            lumos[0],
            "-c",
            "import lumos.hwconfigs, lumos.simulator; print(lumos.simulator.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=True,
    ).stdout
    assert str(site) in where and str(REPO) not in where
    run("convert", str(DATA / "captures" / "ddp"), "-o", "et")
    assert "simulated step" in run("simulate", "et", "--hw", "h100").lower()
    run("export", "astra-sim", "et", "-o", "bundle", "--hw", "h100")
    assert (work / "bundle" / "run.sh").is_file()
