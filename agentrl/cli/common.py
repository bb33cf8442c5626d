"""The ``agentrl`` command line (typer + rich): the app, its consoles and what its commands share.

Every command turns a user mistake (unknown env or algorithm, bad model path, malformed
``--set``, unreadable config) into one sentence on stderr and exit code 2; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.24 carries its own copy of click; its parsing errors are that copy's classes
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover (older typer: the click package)
    from click import exceptions as click_exceptions
from rich.console import Console
from rich.markup import escape

from agentrl.errors import UserError

console = Console()
err_console = Console(stderr=True)


class OneLineUsageErrors(TyperGroup):
    """Command-line parsing mistakes (a missing argument, a word where a number goes, an unknown
    option) as one ``error:`` line and exit 2, like every other user mistake, instead of click's
    usage box."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exceptions.NoArgsIsHelpError as exc:  # the help is already printed
            sys.exit(exc.exit_code)
        except click_exceptions.ClickException as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) is not None else ""
            message = exc.format_message().strip().rstrip(".").replace("\n", " ")
            err_console.print(f"[bold red]error:[/] {message}{where}.", highlight=False, soft_wrap=True, markup=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("Aborted.")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, cls=OneLineUsageErrors,
                  help="Train LLM agents with RL on multi-turn text envs: SAPO, PPO, GRPO.")

EnvOpt = Annotated[str | None, typer.Option("--env", "-e", help="Env id or short name (keydoor, alfworld, webshop).")]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Hub id, alias (Qwen2.5-7B), folder, .gguf file, 'embedded' (default) or 'tiny'.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML file with the run's settings.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", "-s", help="Override a setting: section.key=value (repeatable).")]
BackendOpt = Annotated[str | None, typer.Option("--backend", help="Generation backend: auto (vLLM where installed), hf or vllm (rollout.backend).")]


#: The longest error sentence printed; a value a user pasted (a megabyte line) is cut to this.
MAX_MESSAGE_CHARS = 2000


def _one_line(message: str) -> str:
    """The sentence on one line, cut to :data:`MAX_MESSAGE_CHARS`."""
    message = " ".join(message.split("\n"))
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + " ..."


def user_errors(fn):
    """Report :class:`UserError` as one sentence and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            err_console.print(f"[bold red]error:[/] {escape(_one_line(str(exc)))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


ImportOpt = Annotated[list[str] | None, typer.Option(
    "--import", help="Import this module first (repeatable): your code that registers envs with gymnasium.")]


@app.callback()
@user_errors
def _main(imports: ImportOpt = None) -> None:
    """Train LLM agents with RL on multi-turn text envs: SAPO, PPO, GRPO."""
    if imports:
        from agentrl.envs.modules import import_all

        import_all(imports)


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table: floats to ``digits`` places (whole above 1000), None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _loggers_override(text: str) -> str:
    """``--logger tensorboard,wandb`` as the ``train.loggers`` override it stands for."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    return f"train.loggers=[{','.join(names)}]"


def _option_overrides(*pairs: tuple[str, Any]) -> list[str]:
    """``key=value`` overrides for the options given (None: not given), in order."""
    return [f"{key}={value}" for key, value in pairs if value is not None]
