"""``serve-world`` and ``run-external``: external agents' episodes into ordinary run directories.

Both go through the runner's phases (``plan_run`` -> ``open_run`` -> execute -> ``finalise``; ``run_plan`` does
the last three for a matrix), so the run directory, its manifest, derived files, reports, resume and the trace
store are exactly the built-in ones; only the executor differs. An episode is built, graded and recorded by the
runner's own functions (``build_world``, ``episode_record``); the world is served by :mod:`contextdelta.mcp._server`.

``run-external`` (:class:`AgentCommandExecutor`): per planned episode, a fresh world is served over streamable
HTTP on a free loopback port and the user's command runs with the server's URL in ``CONTEXTDELTA_MCP_URL`` (and
the episode's ids in the environment, :func:`agent_environment`). The episode ends when the command exits (or
earlier, with ``finish`` or the step limit; the command then has ``AGENT_EXIT_GRACE_S`` to exit on its own before
the harness stops it: SIGTERM to its process group, SIGKILL ``STOP_GRACE_S`` later; recorded as
``stopped_by_harness``, and no failure by itself). Whatever it started and left running, in its process group
or not (found by ``AGENT_COOKIE`` in its environment), is stopped when the episode ends. A command that exits
non-zero (or is killed by a signal) or runs past the per-episode timeout is a failed trial (``provider_error``: the
agent is the episode's model); one that exits 0 without calling ``finish`` ends the episode as it left it.

``serve-world`` (:func:`serve_world`): one episode, one agent connected by hand (HTTP) or by a client that
launched the command (stdio). It ends with ``finish``, the step limit, the stdio session closing, or SIGINT/
SIGTERM (the session closing by hand); then it is graded and written as a one-episode run group.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from contextdelta.canonical import sha256_hex
from contextdelta.mcp._episode import WorldEpisode
from contextdelta.mcp._server import loopback_socket, require_mcp, serve_http, serve_stdio, wait_for_end
from contextdelta.providers import one_line
from contextdelta.redaction import Redactor
from contextdelta.rundir import EpisodeRecord, ExternalAgentInfo, Recorder
from contextdelta.runner import (
    BenchmarkError,
    BenchmarkRequest,
    EpisodeJob,
    RunOutcome,
    build_world,
    episode_record,
    finalise,
    open_run,
    plan_run,
    run_plan,
    utc_now,
)
from contextdelta.settings import Settings, load_settings

DEFAULT_TIMEOUT_S = 600.0
AGENT_EXIT_GRACE_S = 5.0
"""Once an episode is over (``finish`` or the step limit), how long its agent command still has to exit on its own
before the harness stops it (it is not waited for until --timeout-s)."""
STOP_GRACE_S = 2.0
"""How long a command being stopped has between SIGTERM to its process group and SIGKILL."""
DRAIN_GRACE_S = 1.0
"""How long the command's output is still read once the command has exited (a background child may keep it open)."""
OUTPUT_TAIL = 2000
"""Bytes of the agent command's output kept in a failed episode's error (redacted, on one line, control characters
written as escapes)."""
AGENT_COOKIE = "CONTEXTDELTA_AGENT_COOKIE"
"""An environment variable set to a fresh random value for each agent command: what the command left running when
the episode ended, in its process group or not, is found by it and stopped."""
HTTP = "streamable-http"
STDIO = "stdio"


def agent_info(
    agent: str,
    *,
    transport: str,
    command: str | None = None,
    timeout_s: float | None = None,
    exit_grace_s: float = AGENT_EXIT_GRACE_S,
    stop_grace_s: float = STOP_GRACE_S,
    secrets: Iterable[str] = (),
) -> ExternalAgentInfo:
    """What the manifest records about the agent; the command with credentials (key-shaped strings and the
    configured ``secrets``) redacted, and its hash; with a command, the rules it is stopped by (the graces)."""
    return ExternalAgentInfo(
        agent=agent,
        transport=transport,
        command=Redactor(secrets).text(command) if command is not None else None,
        command_sha256=sha256_hex(command) if command is not None else None,
        timeout_s=timeout_s,
        exit_grace_s=exit_grace_s if command is not None else None,
        stop_grace_s=stop_grace_s if command is not None else None,
    )


def agent_environment(url: str, job: EpisodeJob, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent command's environment: the caller's, plus where the world is and which episode it is."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "CONTEXTDELTA_MCP_URL": url,
            "CONTEXTDELTA_TASK_ID": job.task.id,
            "CONTEXTDELTA_PROTECTION_MODE": job.spec.protection_mode,
            "CONTEXTDELTA_RUN_ID": job.spec.run_id,
            "CONTEXTDELTA_EPISODE_SEED": str(job.seed),
        }
    )
    return env


def _episode(job: EpisodeJob, agent: str, transport: str) -> tuple[WorldEpisode, dict[str, dict[str, object]]]:
    world = build_world(job.task, job.spec)
    initial = world.state()
    return WorldEpisode(job.task, world, agent, transport, job.max_steps, seed=job.seed), initial


def _record(
    job: EpisodeJob, episode: WorldEpisode, initial: dict[str, dict[str, object]], started: str, clock: float
) -> EpisodeRecord:
    # cost: unknown (the agent's usage is not seen); the runner's own grading and record
    wall_s = time.perf_counter() - clock
    return episode_record(job, episode.trace(), initial, episode.world, started, wall_s, None)


# ---- run-external ----------------------------------------------------------------------------------------------


@dataclass
class AgentCommandExecutor:
    """Runs each episode by serving its world over HTTP and running the agent command against it."""

    agent: str
    command: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: Mapping[str, str] | None = None
    secrets: Sequence[str] = ()
    """The configured secrets, cut out of the command's output before any of it is recorded."""
    exit_grace_s: float = AGENT_EXIT_GRACE_S
    """Once the episode is over, how long the command still has to exit on its own before it is stopped."""
    stop_grace_s: float = STOP_GRACE_S
    """Between SIGTERM and SIGKILL when the command (or what it left running) is stopped."""
    _swept: set[str] = field(default_factory=set, init=False, repr=False)
    _sweeping: anyio.Lock | None = field(default=None, init=False, repr=False)

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        await self._stop_leftovers(job.run_group_id)
        episode, initial = _episode(job, self.agent, HTTP)
        started, clock = utc_now(), time.perf_counter()
        async with serve_http(episode, loopback_socket()) as url:
            env = agent_environment(url, job, self.env)
            # every process the command starts inherits it, those that leave its process group included
            # and it names the run group: what a killed session of this run left running is found on resume
            env[AGENT_COOKIE] = f"{job.run_group_id}.{uuid.uuid4().hex}"
            try:
                await self._run_command(episode, env)
            finally:
                with anyio.CancelScope(shield=True):
                    swept = await _stop_strays(env[AGENT_COOKIE], self.stop_grace_s)
                # without /proc only the process group was stopped: said in the record, never passed off as a sweep
                episode.stray_sweep = "cookie" if swept else "unavailable"
        return _record(job, episode, initial, started, clock)

    async def _stop_leftovers(self, run_group_id: str) -> None:
        """Once per run group, before its first command starts: stop the agent commands (and what they started) that
        an earlier session of this run left running when it was killed (SIGKILL, a crash: its own cleanup never
        ran, and each command has a session of its own, so nothing else stops them). This session holds the run's
        lock, so none of them belongs to a live session."""
        if self._sweeping is None:
            self._sweeping = anyio.Lock()
        async with self._sweeping:
            if run_group_id in self._swept:
                return
            self._swept.add(run_group_id)
            with anyio.CancelScope(shield=True):
                await _stop_strays(f"{run_group_id}.", self.stop_grace_s, prefix=True)

    async def _run_command(self, episode: WorldEpisode, env: dict[str, str]) -> None:
        output = bytearray()
        # its own session (and process group), so stopping it reaches everything it started
        process = await anyio.open_process(
            self.command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            stopped = False
            async with anyio.create_task_group() as reading:
                drained = anyio.Event()
                reading.start_soon(_drain, process, output, drained)
                with anyio.move_on_after(self.timeout_s):
                    await _exit_or_end(process, episode)
                if process.returncode is None and episode.over:
                    # the episode is over (finish, the step limit): the command has a moment to exit on its own,
                    # not the rest of --timeout-s
                    with anyio.move_on_after(self.exit_grace_s):
                        await process.wait()
                if process.returncode is None:
                    await _stop(process, self.stop_grace_s)
                    stopped = True
                # the command is what ends the episode, not its output: a child that left its process group may
                # hold the pipe open for good; take what is left for a moment, then stop reading
                with anyio.move_on_after(DRAIN_GRACE_S):
                    await drained.wait()
                reading.cancel_scope.cancel()
            # one line, its control characters written as escapes (as an endpoint's error text is): the tail goes
            # into the record's error, the failure atlas, the report's table and the terminal, where a terminal
            # escape (ESC ]0;title, ESC [2J) or a carriage return the agent printed would act instead of show
            tail = one_line(Redactor(self.secrets).text(output[-OUTPUT_TAIL:].decode("utf-8", "replace")))
            code = process.returncode
            if stopped and episode.over:  # merely slow to exit after the episode ended: recorded, no failure
                episode.close("agent_stopped", exit_code=code, stopped=True)
            elif stopped:
                episode.close(
                    "timeout",
                    failed=f"the agent command ran past --timeout-s {self.timeout_s:g}" + _tail(tail),
                    exit_code=code,
                    stopped=True,
                )
            elif code != 0:
                episode.close("agent_failed", failed=_exit_text(code) + _tail(tail), exit_code=code)
            else:
                episode.close("agent_exited", exit_code=0)
        finally:
            _kill(process)  # anything the command left behind in its process group
            if process.returncode is None:
                with anyio.CancelScope(shield=True):
                    await process.wait()

    async def aclose(self) -> None:
        return None


async def _drain(process: Process, into: bytearray, done: anyio.Event) -> None:
    try:
        if process.stdout is None:
            return
        async for chunk in process.stdout:
            into.extend(chunk)
            if len(into) > 4 * OUTPUT_TAIL:
                del into[: len(into) - OUTPUT_TAIL]
    finally:
        done.set()


async def _exit_or_end(process: Process, episode: WorldEpisode) -> None:
    """Return once the command has exited or the episode is over, whichever comes first."""
    async with anyio.create_task_group() as group:

        async def first(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        group.start_soon(first, process.wait)
        group.start_soon(first, lambda: wait_for_end(episode))


async def _stop(process: Process, grace_s: float = STOP_GRACE_S) -> None:
    """Stop the command and its process group: SIGTERM, then SIGKILL after ``grace_s``."""
    _kill(process, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        await process.wait()
    _kill(process)
    with anyio.CancelScope(shield=True):
        await process.wait()


PROC = Path("/proc")
"""Where processes' environments are read (Linux); a platform without it cannot look for processes by cookie."""


def cookie_sweep_available() -> bool:
    """Whether processes can be found by their environment here: this process's own is readable under PROC."""
    return os.access(PROC / str(os.getpid()) / "environ", os.R_OK)


def _processes_with(cookie: str, *, prefix: bool = False) -> list[int]:
    """The processes (other than this one) whose environment holds ``AGENT_COOKIE=cookie`` (``prefix``: a cookie
    that starts with ``cookie``), read under PROC; only where :func:`cookie_sweep_available`."""
    marker = f"{AGENT_COOKIE}={cookie}".encode()
    found = []
    for entry in PROC.glob("[0-9]*/environ"):
        pid = int(entry.parent.name)
        with contextlib.suppress(OSError):
            variables = entry.read_bytes().split(b"\0")
            if pid != os.getpid() and any(v == marker or (prefix and v.startswith(marker)) for v in variables):
                found.append(pid)
    return found


async def _stop_strays(cookie: str, grace_s: float = STOP_GRACE_S, *, prefix: bool = False) -> bool:
    """Stop what the agent command left running outside its process group (a child that started a session of its
    own, as the mcp SDK's stdio client starts each server): SIGTERM, then SIGKILL after ``grace_s``. False when
    this platform cannot find processes by their environment (no /proc): nothing was looked for."""
    if not cookie_sweep_available():
        return False
    strays = _processes_with(cookie, prefix=prefix)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        with anyio.move_on_after(grace_s if signum == signal.SIGTERM else 0):
            while strays := _processes_with(cookie, prefix=prefix):
                await anyio.sleep(0.05)
        if not strays:
            return True
    return True


def _kill(process: Process, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _exit_text(code: int | None) -> str:
    """How the command ended, for a failed trial's error: its exit code, or the signal that killed it (a crash)."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"the agent command was killed by signal {signal.Signals(-code).name} ({-code})"
    return f"the agent command exited with code {code}"


def _tail(text: str) -> str:
    return f"; its last output: {text}" if text else ""


SHELL = "/bin/sh"
"""The shell that runs --agent-cmd (as ``anyio.open_process`` runs a command given as a string)."""
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PLAIN_WORD = re.compile(r"[\w./+@:,%~-]+")


def agent_command_problem(command: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why ``command`` cannot run as an agent command, or None: the shell cannot parse it, or the program it starts
    (its first word, after variable assignments and ``exec``) does not exist, is a folder or is not executable.
    Checked before a run starts, so a typo is one clear refusal rather than a run of failed trials. A first word the
    shell expands (``$AGENT``, a glob) is left to the shell."""
    env = dict(os.environ if env is None else env)
    try:
        parsed = subprocess.run(
            [SHELL, "-n", "-c", command], capture_output=True, text=True, env=env, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{SHELL} could not check it ({exc})"
    if parsed.returncode != 0:
        said = one_line(parsed.stderr.strip()) or f"exit {parsed.returncode}"
        return f"{SHELL} cannot parse it ({said}); check its quotes and brackets"
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # the shell reads it (it knows more quoting than shlex): let it run
    while words and (_ASSIGNMENT.match(words[0]) or words[0] == "exec"):
        words = words[1:]
    if not words or not _PLAIN_WORD.fullmatch(words[0]):
        return None
    program = os.path.expanduser(words[0])
    if "/" in program:
        where = "" if os.path.isabs(program) else f" (relative to the current folder {os.getcwd()})"
        if not os.path.exists(program):
            return f"{program} does not exist{where}"
        if os.path.isdir(program):
            return f"{program} is a folder, not a program{where}"
        if not os.access(program, os.X_OK):
            return (
                f"{program} is not executable{where}: make it executable (chmod +x {shlex.quote(program)}) or run "
                f"it through its interpreter (e.g. python3 {shlex.quote(program)})"
            )
        return None
    if shutil.which(program, path=env.get("PATH", os.defpath)) is not None:
        return None
    builtin = subprocess.run(  # a shell builtin or keyword (true, cd, exec, if, ...)
        [SHELL, "-c", 'command -v -- "$1"', SHELL, program], capture_output=True, env=env, timeout=30, check=False
    )
    if builtin.returncode == 0:
        return None
    return (
        f"{program} is not a command on PATH nor a builtin of {SHELL}, which runs the command: give its full path, "
        "or install it"
    )


def run_external(
    request: BenchmarkRequest,
    command: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    settings: Settings | None = None,
    recorders: Sequence[Recorder] = (),
) -> RunOutcome:
    """Run (or resume) the matrix for an agent command (``request.external_agent`` names the agent) and return
    the run directory; BenchmarkError for refusals, McpUnavailable without the mcp extra."""
    require_mcp()
    assert request.external_agent is not None
    settings = settings or load_settings()
    problem = agent_command_problem(command)
    if problem is not None:  # before the plan: a refusal writes nothing
        raise BenchmarkError(f"--agent-cmd: {Redactor(settings.secrets()).text(problem)}")
    plan = plan_run(request, settings)
    exit_grace_s, stop_grace_s = request.external_agent.stop_rules()
    executor = AgentCommandExecutor(
        request.external_agent.agent,
        command,
        timeout_s,
        secrets=settings.secrets(),
        exit_grace_s=AGENT_EXIT_GRACE_S if exit_grace_s is None else exit_grace_s,
        stop_grace_s=STOP_GRACE_S if stop_grace_s is None else stop_grace_s,
    )
    return run_plan(plan, recorders, executor)


# ---- serve-world -----------------------------------------------------------------------------------------------


def serve_world(
    request: BenchmarkRequest,
    *,
    port: int = 0,
    ready: Callable[[str], None] = lambda url: None,
    settings: Settings | None = None,
    recorders: Sequence[Recorder] = (),
) -> RunOutcome:
    """Serve one episode (``request`` plans exactly one) to an agent, then grade and record it as a one-episode
    run group. ``ready`` gets the URL (HTTP) once the server answers, or ``stdio``.

    The episode is recorded the moment it is over (``finish``, the step limit), not when the session closes: a
    client may hold a stdio session open long after it finished, and a serve-world killed meanwhile (SIGKILL)
    kept nothing. ``request.resume`` finishes a killed serve-world run: its episode, when recorded, is kept and the
    run finalised; one cut off before it ended (not recorded) is served again, fresh, with its seed."""
    require_mcp()
    agent = request.external_agent
    assert agent is not None
    plan = plan_run(request, settings or load_settings())
    if len(plan.pending) > 1 or (len(plan.pending) == 0 and plan.manifest is None):
        raise ValueError(f"serve-world serves one episode; the request plans {len(plan.pending)}")
    sock = None
    if agent.transport != STDIO and plan.pending:
        try:  # before the run directory exists: a port in use is a refusal, not a broken run
            sock = loopback_socket(port)
        except OSError as exc:
            raise BenchmarkError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from None
    run = open_run(plan, recorders)
    recorded = False

    def record(served: tuple[WorldEpisode, dict[str, dict[str, object]], str, float]) -> None:
        nonlocal recorded
        if not recorded:
            recorded = True
            run.record(_record(job, *served))

    served = None
    try:
        for job in run.jobs():  # none when a resumed run's episode is recorded: it is only finalised
            served = anyio.run(_serve_one, job, agent.agent, agent.transport, sock, ready, record)
    except KeyboardInterrupt:
        run.stop_reason = "interrupted by SIGINT"
    finally:
        # the agent is gone and the episode over: what is left is writing it, which a client's SIGTERM right after
        # it closed the session (the mcp SDK's stdio client sends one 2 s after closing stdin) must not cut short
        with _signals_held():
            if served is not None:
                record(served)
            outcome = finalise(run)
    return outcome


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM are noted and otherwise ignored inside the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in held}
    for signum in held:
        signal.signal(signum, lambda signum, frame: None)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


Served = tuple[WorldEpisode, dict[str, dict[str, object]], str, float]
"""What ``_record`` needs to grade and record a served episode: the episode, its initial state, when it started."""


async def _serve_one(
    job: EpisodeJob,
    agent: str,
    transport: str,
    sock: socket.socket | None,
    ready: Callable[[str], None],
    record: Callable[[Served], None] = lambda served: None,
) -> Served:
    """Serve the episode until the session ends; ``record`` gets it the moment it is over (``finish``, the step
    limit), while the session may still go on (its further calls change nothing)."""
    episode, initial = _episode(job, agent, transport)
    started, clock = utc_now(), time.perf_counter()
    async with anyio.create_task_group() as group:

        async def record_when_over() -> None:
            await wait_for_end(episode)
            # written here, in the event loop: SIGINT and SIGTERM reach the receiver below, not this write
            record((episode, initial, started, clock))

        group.start_soon(record_when_over)

        async def closed_by_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    episode.close("session_closed")  # a second signal changes nothing: the episode is ending
                    if sock is None:  # stdio: nothing else ends the read of stdin
                        group.cancel_scope.cancel()
                    # HTTP: the episode is over, so the server below shuts down gracefully (cancelling it would
                    # tear its lifespan task and print a traceback); the receiver stays until it has (cancelled
                    # with the group), so a second Ctrl-C meanwhile is no KeyboardInterrupt that loses the episode

        group.start_soon(closed_by_signal)
        if sock is None:
            ready(STDIO)
            await serve_stdio(episode)
            episode.close("session_closed")
        else:
            async with serve_http(episode, sock) as url:
                ready(url)
                await wait_for_end(episode)
                await anyio.sleep(0.2)  # let the finish answer reach the agent before the server stops
        group.cancel_scope.cancel()
    return episode, initial, started, clock
