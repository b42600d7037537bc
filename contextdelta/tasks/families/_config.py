"""The config world's material for families: integer settings per environment with owners, the tuning work that
fills a horizon (staging and prod values set for load tests), and read-only look-ups that fill one without a
write."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from contextdelta.tasks.families._base import WorkItem, call, predicate
from contextdelta.tasks.schema import Principal

PRINCIPAL = Principal(
    name="Kenji Watanabe", role="Platform site reliability engineer, Lumen", email="kenji.watanabe@lumen.dev"
)
OWNERS = ("platform-sre@lumen.dev", "payments-eng@lumen.dev", "search-eng@lumen.dev", "growth-eng@lumen.dev")
ACTORS = ("oncall-sre@lumen.dev", "ana.lima@lumen.dev", "tom.becker@lumen.dev", "ines.garcia@lumen.dev")
SETTINGS = (
    ("api.rate_limit_per_minute", 600, 50, "Requests per minute per API key."),
    ("api.rate_limit_burst", 100, 10, "Burst allowance per API key."),
    ("payments.retry_limit", 3, 1, "Retries of a failed payment capture."),
    ("payments.capture_timeout_ms", 4000, 250, "Timeout of a payment capture call."),
    ("search.cache_ttl_seconds", 300, 30, "Lifetime of cached search results."),
    ("search.max_results", 50, 10, "Results per search page."),
    ("queue.max_batch_size", 200, 20, "Jobs a worker takes per batch."),
    ("queue.worker_concurrency", 16, 2, "Jobs a worker runs at once."),
    ("email.send_rate_per_second", 20, 5, "Outgoing emails per second."),
    ("checkout.session_timeout_s", 900, 60, "Idle checkout session lifetime."),
    ("images.max_upload_mb", 10, 2, "Largest accepted image upload."),
    ("auth.max_login_attempts", 5, 1, "Failed logins before a lockout."),
    ("orders.export_page_size", 500, 50, "Rows per order export page."),
    ("cdn.purge_batch_size", 100, 10, "URLs per CDN purge request."),
)


def setting_key(environment: str, key: str) -> str:
    """The resource key of a setting."""
    return f"config/setting/{environment}:{key}"


@dataclass(frozen=True)
class Knob:
    """One setting of a generated task: environment, key, starting value and a natural step size."""

    environment: str
    key: str
    value: int
    step: int

    @property
    def resource(self) -> str:
        return setting_key(self.environment, self.key)

    @property
    def prefix(self) -> str:
        """The key's first segment with its dot (``payments.``)."""
        return self.key.split(".")[0] + "."

    @property
    def label(self) -> str:
        return f"{self.environment} {self.key}"


@dataclass
class ConfigStore:
    """The settings of one generated task, with a seeded choice of keys."""

    rng: random.Random
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pool: list[tuple[str, int, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pool = list(SETTINGS)
        self.rng.shuffle(self._pool)

    def knob(self, environment: str, also_staging: bool = False) -> Knob:
        """Add a setting not used yet (in ``environment``, and in staging too when asked)."""
        key, base, step, description = self._pool.pop()
        value = base + step * self.rng.randrange(0, 4)
        owner = self.rng.choice(OWNERS)
        for env in dict.fromkeys((environment, "staging") if also_staging else (environment,)):
            self.settings[f"{env}:{key}"] = {
                "environment": env,
                "key": key,
                "value_type": "integer",
                "value": value,
                "owner": owner,
                "description": description,
            }
        return Knob(environment, key, value, step)

    def state(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The initial state: ``{"setting": {...}}``."""
        return {"setting": self.settings}


def tuning_work(store: ConfigStore, distractors: list[Knob]) -> Iterator[WorkItem]:
    """Endless two-call items cycling over ``distractors``: list the setting's prefix, then set it for a load
    test (a listing rather than ``get_config``, so an agent that skips re-reading a setting it still has in view
    makes as many calls as the horizon counts)."""
    values = {k.resource: k.value for k in distractors}
    turn = 0
    while True:
        knob = distractors[turn % len(distractors)]
        values[knob.resource] += knob.step
        value = values[knob.resource]
        yield WorkItem(
            step=f"For this week's load test, list the {knob.environment} {knob.prefix}* settings and set {knob.label} "
            f"to {value}.",
            calls=(
                call("list_configs", environment=knob.environment, prefix=knob.prefix),
                call("set_config", environment=knob.environment, key=knob.key, value=value),
            ),
            predicates=(predicate(knob.resource, "value", "eq", value),),
        )
        turn += 1


def value_lookup(knob: Knob) -> WorkItem:
    """A one-call item: look a setting up and report its value, without changing it."""
    return WorkItem(
        step=f"Look up {knob.label} and tell me its value in your final answer (don't change it).",
        calls=(call("get_config", environment=knob.environment, key=knob.key),),
        facts=(str(knob.value),),
    )


def lookup_work(distractors: list[Knob]) -> Iterator[WorkItem]:
    """Endless one-call, read-only items cycling over ``distractors``: report a setting's value (``get_config``),
    then how many settings share its prefix (``list_configs``); a repeat of the cycle asks again ("still")."""
    turn = 0
    while True:
        knob = distractors[(turn // 2) % len(distractors)]
        again = " still" if turn >= 2 * len(distractors) else ""
        if turn % 2 == 0:
            yield WorkItem(
                step=f"Look up {knob.label} and tell me what it is{again} set to in your final answer (don't change "
                "it).",
                calls=(call("get_config", environment=knob.environment, key=knob.key),),
                facts=(str(knob.value),),
            )
        else:
            yield WorkItem(
                step=f"List the {knob.environment} {knob.prefix}* settings and tell me how many there{again} are in "
                "your final answer.",
                calls=(call("list_configs", environment=knob.environment, prefix=knob.prefix),),
            )
        turn += 1
