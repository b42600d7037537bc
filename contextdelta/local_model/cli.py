"""``contextdelta local-model info|serve``: the embedded local model endpoint.

``serve`` assembles (or re-verifies) the pinned GGUF file, loads it, and once the endpoint answers prints ONE
line to stdout and flushes it, like the scripted test server:

    ready port=8080 base_url=http://127.0.0.1:8080/v1 model=qwen2.5-coder-1.5b-instruct-q4_k_m

Progress and per-request log lines go to stderr. It runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any

import typer

from contextdelta._flags import PATH_METAVAR, path_flag
from contextdelta.local_model.assembly import (
    CACHE_ENV,
    LocalModelError,
    cached_model_path,
    default_cache_dir,
    digest_files,
    ensure_model_file,
    installed_part_count,
)
from contextdelta.local_model.catalog import DEFAULT_MODEL_KEY, LOCAL_MODELS, LocalModelSpec, get_model_spec

app = typer.Typer(
    name="local-model",
    help="The embedded local model: an offline OpenAI-compatible endpoint (needs the local extra: make local).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_PORT = 8080
DEFAULT_N_CTX = 16384
RUNTIME_PACKAGES = ("llama-cpp-python", "fastapi", "uvicorn")

ModelOption = Annotated[str, typer.Option("--model", help=f"Which pinned model: {', '.join(sorted(LOCAL_MODELS))}.")]
CacheOption = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help=f"Where the assembled model file is kept (default {CACHE_ENV}).",
        show_default=False,
        parser=path_flag,
        metavar=PATH_METAVAR,
    ),
]


def _cache(cache_dir: Path | None) -> Path:
    """The model cache folder in use; exit 2 when that path is something other than a folder."""
    cache = cache_dir or default_cache_dir()
    if cache.exists() and not cache.is_dir():
        typer.echo(
            f"error: the model cache {cache} is not a folder; point CONTEXTDELTA_MODEL_CACHE (or --cache-dir) at a "
            "folder",
            err=True,
        )
        raise typer.Exit(2)
    return cache


def _spec(key: str) -> LocalModelSpec:
    try:
        return get_model_spec(key)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _installed_version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def default_threads() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@app.command("info")
def info_command(
    model: Annotated[str | None, typer.Option("--model", help="Only this model (default: every pinned model).")] = None,
    cache_dir: CacheOption = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Hash the cached file, or the installed parts, against the pin.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Show the pinned models, whether their parts are installed and cached, and the runtime packages."""
    specs = [_spec(model)] if model else list(LOCAL_MODELS.values())
    cache = _cache(cache_dir)
    report: dict[str, Any] = {
        "cache_dir": str(cache),
        "runtime": {name: _installed_version(name) for name in RUNTIME_PACKAGES},
        "models": [],
    }
    for spec in specs:
        cached = cached_model_path(spec, cache)
        entry: dict[str, Any] = {
            "key": spec.key,
            "served_name": spec.served_name,
            "title": spec.title,
            "packages": f"{spec.package_prefix}1..{spec.part_count}=={spec.package_version}",
            "parts_installed": installed_part_count(spec),
            "part_count": spec.part_count,
            "sha256": spec.sha256,
            "size_bytes": spec.size_bytes,
            "cached_file": str(cached) if cached.is_file() else None,
        }
        if verify:
            entry["verified"] = _verify(spec, cached)
        report["models"].append(entry)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print_info(report)
    if verify and not all(entry["verified"] == "match" for entry in report["models"]):
        raise typer.Exit(1)


def _verify(spec: LocalModelSpec, cached: Path) -> str:
    from contextdelta.local_model.assembly import part_paths

    try:
        paths = [cached] if cached.is_file() else part_paths(spec)
    except LocalModelError:
        return "parts missing"
    digest = digest_files(paths)
    return "match" if digest.sha256 == spec.sha256 and digest.size == spec.size_bytes else f"MISMATCH {digest.sha256}"


def _print_info(report: dict[str, Any]) -> None:
    typer.echo(f"cache: {report['cache_dir']}")
    runtime = ", ".join(f"{name} {ver or 'not installed'}" for name, ver in report["runtime"].items())
    typer.echo(f"runtime: {runtime}")
    for entry in report["models"]:
        default = " (default)" if entry["key"] == DEFAULT_MODEL_KEY else ""
        typer.echo(f"\n{entry['key']}{default}: {entry['title']}")
        typer.echo(f"  served as   {entry['served_name']}")
        typer.echo(f"  packages    {entry['packages']} ({entry['parts_installed']}/{entry['part_count']} installed)")
        typer.echo(f"  sha256      {entry['sha256']} ({entry['size_bytes'] / 1e9:.2f} GB)")
        typer.echo(f"  cached      {entry['cached_file'] or 'no (assembled on first serve)'}")
        if "verified" in entry:
            typer.echo(f"  verified    {entry['verified']}")


@app.command("serve")
def serve_command(
    model: ModelOption = DEFAULT_MODEL_KEY,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one (printed in the ready line).")
    ] = DEFAULT_PORT,
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=512, help="Context window in tokens.")] = DEFAULT_N_CTX,
    threads: Annotated[int | None, typer.Option(min=1, help="CPU threads (default: every available core).")] = None,
    max_tokens: Annotated[
        int, typer.Option(min=1, help="Completion tokens allowed when a request sets no max_tokens.")
    ] = 1024,
    cache_dir: CacheOption = None,
    record: Annotated[
        Path | None,
        typer.Option(
            help="Append one JSON line per generation (raw model text, tokens, timings).",
            parser=path_flag,
            metavar=PATH_METAVAR,
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option(help="Log every request to stderr.")] = True,
) -> None:
    """Serve the pinned model as an OpenAI-compatible endpoint (/v1/models, /v1/chat/completions)."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s"
    )
    spec = _spec(model)
    missing = [name for name in RUNTIME_PACKAGES if _installed_version(name) is None]
    if missing:
        typer.echo(
            f"error: the local extra is not installed (missing: {', '.join(missing)}). "
            "Install it with `make local` or `pip install '.[local]'`.",
            err=True,
        )
        raise typer.Exit(2)
    try:
        path = ensure_model_file(spec, _cache(cache_dir), progress=_progress_printer(spec))
    except LocalModelError as exc:
        typer.echo(f"\nerror: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"\nmodel file {path} (sha256 verified)", err=True)

    from contextdelta.local_model.engine import LocalChatEngine
    from contextdelta.local_model.llama import load_llama
    from contextdelta.local_model.server import EndpointServer

    n_threads = threads or default_threads()
    generator, template = load_llama(path, n_ctx=n_ctx, n_threads=n_threads)
    engine = LocalChatEngine(
        generator,
        template,
        spec.served_name,
        default_max_tokens=max_tokens,
        fingerprint=spec.sha256,
        record_path=record,
    )
    typer.echo(f"loaded {spec.title}: n_ctx={n_ctx}, threads={n_threads}", err=True)

    def ready(bound: int) -> None:
        print(f"ready port={bound} base_url=http://{host}:{bound}/v1 model={spec.served_name}", flush=True)

    EndpointServer(engine, host=host, port=port).run(on_ready=ready)


def _progress_printer(spec: LocalModelSpec) -> Any:
    state = {"shown": -1}

    def show(done: int, total: int) -> None:
        percent = int(done * 100 / total) if total else 0
        if percent // 10 != state["shown"]:
            state["shown"] = percent // 10
            sys.stderr.write(f"\rverifying {spec.served_name}: {percent}%")
            sys.stderr.flush()

    return show
