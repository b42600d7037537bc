"""Command line of the scripted OpenAI-compatible test server.

    python -m contextdelta.testing.server --policy oracle|unsafe|context_trusting [--tasks DIR|package:NAME]
        [--port P] [--latency-ms N] [--host 127.0.0.1] [--prompt-cache off|reads|reads_and_writes] [fault flags]

``--tasks`` names the suite as every command does (default: ``./tasks`` when it is a folder, else the packaged
``core`` suite), so the server works from an installed package as from a clone.

Once the socket accepts connections it prints ONE line to stdout and flushes it:

    ready port=54321 base_url=http://127.0.0.1:54321/v1 model=scripted-oracle tasks=24

``--port 0`` (the default) picks a free port: read it from that line (tests that run in parallel do). The
server then runs until SIGTERM or SIGINT. Fault flags take a request selector (``N``, ``first:N``,
``every:K``, ``at:I,J``, ``all``, ``A+B``; see :mod:`contextdelta.testing.faults`).
"""

from __future__ import annotations

import logging
import math
import signal
import sys
from types import FrameType
from typing import Annotated

import typer

from contextdelta.tasks import resolve_suite
from contextdelta.testing.app import PromptCacheMode, ScriptedServer
from contextdelta.testing.faults import REFUSALS, FaultPlan
from contextdelta.testing.policies import PolicyName

SELECTOR = "SELECTOR"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


DAY_S = 86_400.0
"""The longest delay a flag sets (--retry-after, --outage-s): longer is a typo, and a delay of 1e300 s overflows the
event loop's clock."""
DAY_MS = 86_400_000


def _delay(value: float) -> float:
    """A typer callback for a delay in seconds: refuses nan and inf, which pass typer's ``min`` (nan passes every
    comparison; a range's ``max`` would call them "too big"), and more than a day."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number; allowed: 0 to {DAY_S:g}")
    if value > DAY_S:
        raise typer.BadParameter(f"{value:g} is more than a day; allowed: 0 to {DAY_S:g} (seconds)")
    return value


def _refusal(value: int) -> int:
    """A typer callback for --refuse-status: one of the refusals the server can send (``REFUSALS``)."""
    if value not in REFUSALS:
        allowed = sorted(REFUSALS)
        raise typer.BadParameter(
            f"{value} is out of range; allowed: {', '.join(map(str, allowed[:-1]))} or {allowed[-1]}"
        )
    return value


@app.command()
def main(
    policy: Annotated[PolicyName, typer.Option(help="Scripted policy to answer with.", case_sensitive=False)],
    tasks: Annotated[
        str | None,
        typer.Option(
            help="Task suite: a folder of <world>/<id>.yaml files or package:NAME (default: ./tasks when it is a "
            "folder, else package:core).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one (printed in the ready line).")
    ] = 0,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    latency_ms: Annotated[
        int, typer.Option(min=0, max=DAY_MS, help="Sleep this long before every chat answer (at most a day).")
    ] = 0,
    prompt_cache: Annotated[
        PromptCacheMode,
        typer.Option(help="Report prompt caching: off, reads (cached prefix tokens), reads_and_writes (and writes)."),
    ] = PromptCacheMode.OFF,
    fail_429: Annotated[str | None, typer.Option(metavar=SELECTOR, help="Answer 429 with Retry-After.")] = None,
    retry_after: Annotated[
        float, typer.Option(min=0, callback=_delay, help="Retry-After seconds sent with each 429.")
    ] = 1.0,
    retry_after_http_date: Annotated[bool, typer.Option(help="Send Retry-After as an HTTP date.")] = False,
    no_retry_after: Annotated[
        bool, typer.Option("--no-retry-after", help="Send 429s without a Retry-After header.")
    ] = False,
    fail_500: Annotated[str | None, typer.Option(metavar=SELECTOR, help="Answer 500.")] = None,
    fail_context_length: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Answer 400 context_length_exceeded.")
    ] = None,
    drop_connection: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Close the connection without answering.")
    ] = None,
    no_choices: Annotated[str | None, typer.Option(metavar=SELECTOR, help="Answer 200 with no choices.")] = None,
    slow: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Delay these by --slow-ms (default: all, if --slow-ms set).")
    ] = None,
    slow_ms: Annotated[int, typer.Option(min=0, max=DAY_MS, help="Extra delay of slow requests, in milliseconds.")] = 0,
    malformed_args: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Send tool-call arguments that are not JSON.")
    ] = None,
    unknown_tool: Annotated[str | None, typer.Option(metavar=SELECTOR, help="Call a tool that does not exist.")] = None,
    echo_credentials: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Quote the request's Authorization/api-key headers back.")
    ] = None,
    hang: Annotated[str | None, typer.Option(metavar=SELECTOR, help="Hold these and never answer.")] = None,
    require_api_key: Annotated[
        str | None, typer.Option(help="Answer 401 unless 'Authorization: Bearer KEY' is sent.", show_default=False)
    ] = None,
    silent: Annotated[bool, typer.Option(help="Accept connections and never answer anything.")] = False,
    reject_tools: Annotated[bool, typer.Option(help="Answer 400 to chat requests that carry tools.")] = False,
    no_models: Annotated[bool, typer.Option("--no-models", help="Answer 404 to GET /v1/models.")] = False,
    outage_after: Annotated[
        int | None, typer.Option(min=1, help="Start an outage (every request 503) at this chat request number.")
    ] = None,
    outage_s: Annotated[
        float, typer.Option(min=0, callback=_delay, help="How long the outage lasts, in seconds.")
    ] = 0.0,
    no_usage: Annotated[
        str | None, typer.Option(metavar=SELECTOR, help="Answer without the completion's usage field.")
    ] = None,
    refuse_from: Annotated[
        int | None, typer.Option(min=1, help="Refuse every chat request from this number on (--refuse-status).")
    ] = None,
    refuse_status: Annotated[
        int,
        typer.Option(
            callback=_refusal, help="The refusal of --refuse-from: 401, 402, 403, 404 or 429 (insufficient_quota)."
        ),
    ] = 401,
    verbose: Annotated[bool, typer.Option(help="Log every request to stderr.")] = False,
) -> None:
    """Serve a deterministic scripted policy as an OpenAI-compatible chat-completions endpoint."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr)
    try:
        faults = FaultPlan(
            fail_429=fail_429,
            retry_after=None if no_retry_after else retry_after,
            retry_after_http_date=retry_after_http_date,
            fail_500=fail_500,
            fail_context_length=fail_context_length,
            drop_connection=drop_connection,
            no_choices=no_choices,
            slow=slow,
            slow_ms=slow_ms,
            malformed_args=malformed_args,
            unknown_tool=unknown_tool,
            echo_credentials=echo_credentials,
            hang=hang,
            require_api_key=require_api_key,
            silent=silent,
            reject_tools=reject_tools,
            no_models=no_models,
            outage_after=outage_after,
            outage_s=outage_s,
            no_usage=no_usage,
            refuse_from=refuse_from,
            refuse_status=refuse_status,
        )
        suite = resolve_suite(tasks)
        server = ScriptedServer(
            policy, suite.path, faults=faults, latency_ms=latency_ms, host=host, port=port, prompt_cache=prompt_cache
        )
    except ValueError as exc:  # SuiteError is a ValueError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # a missing task folder, or the port taken (name it: "[Errno 98]" alone says nothing)
        where = "" if isinstance(exc, FileNotFoundError) else f" (binding {host}:{port}; choose a free --port)"
        typer.echo(f"error: {exc.strerror if exc.strerror and not exc.filename else exc}{where}", err=True)
        raise typer.Exit(2) from None

    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    try:  # from the ready line on: a SIGTERM the moment a client read it still ends the server cleanly (exit 0)
        print(
            f"ready port={server.port} base_url={server.base_url} model={server.model_name} "
            f"tasks={len(server.policy.catalog)}",
            flush=True,
        )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def run() -> None:
    """Entry point for ``python -m contextdelta.testing.server``."""
    app()


if __name__ == "__main__":
    run()
