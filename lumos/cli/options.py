"""One spelling per concept across commands: the shared options and the overwrite rule.

Every command that writes takes `-o/--output` and replaces an existing output only with
`--force`; a trace is the positional `TRACE`; hardware is `--hw NAME|YAML` (names are
case-insensitive and listed in the help); ASTRA-sim configs are `--astra-sim-system`,
`--astra-sim-network` and `--comm-groups` wherever they are read. Old spellings stay as
aliases that the help does not show.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from lumos.errors import ConfigError, LumosError
from lumos.limits import MAX_MICROBATCHES, MAX_RANKS, Limit
from lumos.outputs import is_link_loop, output_target, refuse_link_loop

F = TypeVar("F", bound=Callable[..., Any])


class AliasedOption(click.Option):
    """A click option whose old spellings (`hidden_aliases`) work but are not shown."""

    def __init__(self, *args: Any, hidden_aliases: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = frozenset(hidden_aliases)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts = self.opts
        self.opts = [o for o in opts if o not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


class BadOption(click.BadParameter):
    """A bad option value, shown as one `error:` line (no usage block) with exit code 2."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class InputPath(click.Path):
    """`click.Path` that names a symbolic-link loop as one: click's own check calls it
    "does not exist", which sends the user looking for a missing file."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        refuse_input_loop(value)
        return super().convert(value, param, ctx)


def refuse_input_loop(path: str | os.PathLike[str]) -> None:
    """Raises BadOption (exit 2) if `path`, or a folder on its way, is a symbolic-link loop."""
    if is_link_loop(path):
        raise BadOption(
            f"{path}: a symbolic link loop (its links point at each other), not a file "
            "or folder; name what the links were meant to point at"
        )


def trace_argument(**kwargs: Any) -> Callable[[F], F]:
    """The positional TRACE: a folder, prefix, .et file or tar of <prefix>.<rank>.et."""
    return click.argument("trace", metavar="TRACE", type=InputPath(exists=False), **kwargs)


def output_option(
    help_text: str, *, required: bool = True, old: Iterable[str] = (), dir_okay: bool = False
) -> Callable[[F], F]:
    """`-o/--output PATH` (old spellings in `old` still accepted, not shown)."""
    old = tuple(old)
    return click.option(
        "-o",
        "--output",
        *old,
        "output",
        cls=AliasedOption,
        hidden_aliases=old,
        required=required,
        type=click.Path(dir_okay=dir_okay, file_okay=not dir_okay),
        help=help_text,
    )


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses NaN (every comparison with NaN is false, so
    FloatRange lets it through) and the infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number


class Bounded(click.IntRange):
    """A whole number from `least` to a bound: a number, or a resource limit read when the
    value is (so its LUMOS_MAX_* variable raises it here too). A value past the bound is a
    usage error (exit 2) naming the flag and the bound, before any work: `--mbs 10^9` was
    exit 5 from a 64-bit product naming no flag, `--dp 10^12` exit 7 for the world size."""

    name = "integer"

    def __init__(self, least: int, bound: int | Limit, scale: int = 1) -> None:
        super().__init__(min=least)
        self.bound, self.scale = bound, scale

    def most(self) -> int | None:
        """The largest value taken now; None while the limit's variable is garbage (the
        command's environment check refuses that, exit 4, naming the variable)."""
        if not isinstance(self.bound, Limit):
            return self.bound * self.scale
        try:
            return self.bound.value * self.scale
        except ConfigError:
            return None

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        most = self.most()
        if most is not None and number > most:
            why = ""
            if isinstance(self.bound, Limit):
                times = f" x {self.scale:,} ranks" if self.scale > 1 else ""
                why = f" ({self.bound.env}{times}; raise it with {self.bound.env}=N if genuine)"
            self.fail(f"{number:,} is above {most:,}, the most lumos takes{why}.", param, ctx)
        return number

    def _describe_range(self) -> str:
        most = self.most()
        return f"{self.min}<=x<={most:,}" if most is not None else f"x>={self.min}"


#: `--gbs` (sequences): the most micro-batches a step takes, of one sequence, on the
#: default largest world (the plan then checks gbs / (mbs x dp) against the limit itself)
GLOBAL_BATCH = Bounded(1, MAX_MICROBATCHES, scale=MAX_RANKS.default)


class RankList(click.ParamType):
    """`0,1,5` or `0-3,8`: ranks, sorted, each once (a bad spelling is exit code 2)."""

    name = "RANKS"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        ranks: set[int] = set()
        for part in str(value).replace(" ", "").split(","):
            lo, dash, hi = part.partition("-")
            if not lo.isdigit() or (dash and not hi.isdigit()):
                raise BadOption(f"--ranks {value!r}: give ranks like 0,1,5 or 0-3,8")
            first, last = int(lo), int(hi) if dash else int(lo)
            if last < first:
                raise BadOption(f"--ranks {value!r}: range {part} runs backwards")
            if last - first > 1 << 20:
                raise BadOption(f"--ranks {value!r}: range {part} is too long")
            ranks.update(range(first, last + 1))
        return tuple(sorted(ranks))


force_option = click.option(
    "--force", is_flag=True, help="Replace outputs that already exist (else refuse)."
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON (schema: docs/json.md)."
)


def check_output(
    path: str | Path | None,
    force: bool,
    *,
    folder: bool = False,
    inputs: Iterable[str | Path] = (),
) -> None:
    """The overwrite rule: an existing output is replaced only with --force, and the
    folder it goes in must exist (a folder output is created, its parent must exist).
    A file output that is one of the command's `inputs` (a trace file, or a rank file
    of a trace folder or prefix) is refused even with --force: it would be replaced by
    what was computed from it.

    Raises LumosError naming the path and the fix; OutputError for a link loop.
    """
    if path is None:
        return
    p = Path(path)
    refuse_link_loop(p)
    parent = p.resolve().parent
    if not parent.is_dir():
        raise LumosError(f"{p}: folder {parent} does not exist; create it first")
    if folder:
        if p.is_file():
            raise LumosError(f"{p}: is a file, expected a folder")
        if p.is_dir() and any(p.iterdir()) and not force:
            raise LumosError(f"{p}: folder exists and is not empty; pass --force to write into it")
        return
    if p.is_dir():
        raise LumosError(f"{p}: is a folder, expected a file name")
    output_target(p)  # a device, FIFO or socket in the way (even through a link): OutputError
    source = next((str(i) for i in inputs if _reads(Path(i), p)), None)
    if source is not None:
        raise LumosError(
            f"{p}: is an input of this command ({source}); writing it would destroy what it "
            "is computed from, even with --force: choose another path"
        )
    if p.exists() and not force:
        raise LumosError(f"{p}: exists; pass --force to replace it")


def _reads(source: Path, out: Path) -> bool:
    """Whether a command reading `source` (a file, a trace folder, or a folder/prefix of
    rank files) reads the existing file `out`."""
    if not out.is_file():
        return False
    if source.is_file():
        return os.path.samefile(source, out)
    folder = source if source.is_dir() else source.parent
    return (
        folder.is_dir()
        and os.path.samefile(folder, out.parent)
        and out.name.endswith((".et", ".et.gz"))
    )


def shipped_systems() -> list[str]:
    """Short names of the shipped hardware systems (files in lumos/hwconfigs/systems),
    listed without importing the configs' loader: every `--hw` help names them, and
    the loader costs each command ~50 ms of yaml at start-up."""
    from importlib.util import find_spec

    spec = find_spec("lumos.hwconfigs")
    assert spec is not None and spec.submodule_search_locations is not None
    folder = Path(next(iter(spec.submodule_search_locations))) / "systems"
    return sorted(p.stem for p in folder.glob("*.yaml"))


def normalize_hw(value: str | None) -> str | None:
    """A shipped name in lower case; a path (has '/' or ends in .yaml/.yml) as given.

    Raises BadOption (exit code 2) for an unknown name, listing the shipped ones.
    """
    if value is None:
        return None
    if "/" in value or value.lower().endswith((".yaml", ".yml")):
        return value
    name = value.lower()
    names = shipped_systems()
    if name not in names:
        raise BadOption(
            f"unknown system {value!r}; shipped: {', '.join(names)} (or a YAML path; "
            "`lumos hw list` describes them)",
            param_hint="'--hw'",
        )
    return name


def hw_option(help_text: str, default: str | None = None) -> Callable[[F], F]:
    """`--hw NAME|YAML`: a shipped system (case-insensitive) or a system YAML file."""
    names = ", ".join(shipped_systems())
    return click.option(
        "--hw",
        default=default,
        metavar="NAME|YAML",
        callback=lambda _ctx, _param, value: normalize_hw(value),
        help=f"{help_text} Shipped: {names} (see `lumos hw list`), or a system YAML path.",
    )


def astra_sim_options(func: F) -> F:
    """`--astra-sim-system`, `--astra-sim-network`, `--comm-groups` (ASTRA-sim inputs)."""
    options = [
        click.option(
            "--astra-sim-system",
            "--system",
            "astra_sim_system",
            cls=AliasedOption,
            hidden_aliases=("--system",),
            type=InputPath(exists=True, dir_okay=False),
            help="ASTRA-sim system JSON.",
        ),
        click.option(
            "--astra-sim-network",
            "--network",
            "astra_sim_network",
            cls=AliasedOption,
            hidden_aliases=("--network",),
            type=InputPath(exists=True, dir_okay=False),
            help="ASTRA-sim network YAML.",
        ),
        click.option(
            "--comm-groups",
            "--comm-group",
            "comm_groups",
            cls=AliasedOption,
            hidden_aliases=("--comm-group",),
            type=InputPath(exists=True, dir_okay=False),
            help="ASTRA-sim comm-group JSON (pg_name -> ranks), for numeric pg_names.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


#: `--framework` choices: the kernel profiles of `simulator/workload/framework.py`
FRAMEWORKS = (
    "megatron",
    "torchtitan",
    "torchtitan-compile",
    "olmo-core",
    "hf-eager",
    "automodel",
    "llm-foundry",
)


def framework_option(func: F) -> F:
    """`--framework`: whose kernels run the layer (a profile of `workload.framework`)."""
    return click.option(
        "--framework",
        type=click.Choice(FRAMEWORKS),
        default="megatron",
        show_default=True,
        help="Whose kernels run the layer: Megatron-LM / NeMo / Megatron-Bridge with Transformer "
        "Engine, torchtitan in eager PyTorch (FSDP2), torchtitan under torch.compile, OLMo-core "
        "(torchtitan-compile with a fused loss), a Hugging Face model class in eager PyTorch "
        "(hf-eager: Trainer / Accelerate with flash-attn 2, DeepSpeed ZeRO or FSDP1), NeMo "
        "AutoModel's MoE models (automodel: Transformer Engine kernels under FSDP2), or "
        "llm-foundry (Composer + PyTorch FSDP1). "
        "Another stack: docs/estimate.md, 'Which --framework for my stack'.",
    )(func)
