"""``agentrl report``: HTML and Markdown from run directories (:mod:`agentrl.reporting`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrl.cli.common import (
    app,
    console,
    user_errors,
)
from agentrl.errors import UserError

# --- bench and report --------------------------------------------------------------------------
# Running a comparison is agentrl.bench's (beside the trainer); agentrl.reporting only reads
# run directories. Heavy imports happen when a command runs, so `agentrl --help` stays fast.


@app.command()
@user_errors
def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories, or folders holding them (a bench output).",
            show_default=False,
        ),
    ],
    output_: Annotated[
        str,
        typer.Option("--output", "-o", help="Folder for report.html, report.md and figures/ (new, empty, or a report's)."),
    ] = "report",
    traces: Annotated[int, typer.Option(help="Value-trace episodes per algorithm.")] = 2,
    title: Annotated[
        str | None, typer.Option(help="Report title (default: algorithms on env).")
    ] = None,
) -> None:
    """Build a self-contained HTML report and a Markdown twin from run directories."""
    from agentrl.reporting.report import build_report
    from agentrl.rundir.output_paths import check_owned_dir, given_path

    output = given_path(output_, "--output")
    if traces < 0:
        raise UserError(f"--traces cannot be negative ({traces}).")
    from agentrl.training.config import check_option

    check_option("--traces", traces)
    check_owned_dir(output, "report folder", "a report", _is_report)
    from agentrl.reporting.suite import build_suite_report, is_suite

    if len(run_dirs) == 1 and is_suite(run_dirs[0]):  # an `agentrl suite` output folder
        html, markdown, count = build_suite_report(run_dirs[0], output)
        console.print(f"behaviour suite, {count} finished runs\nHTML: {html}\nMarkdown: {markdown}")
        return
    files = build_report(run_dirs, output, traces, title)
    console.print(
        f"{files.runs} runs in {len(files.groups)} groups ({', '.join(files.groups)}); "
        f"{len(files.figures)} figures"
    )
    console.print(f"HTML: {files.html}\nMarkdown: {files.markdown}")


def _is_report(folder: Path) -> bool:
    """A folder ``agentrl report`` wrote before (rewriting it is what a user asks for)."""
    return (folder / "report.html").is_file() or (folder / "report.md").is_file()
