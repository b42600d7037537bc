"""The strategy registry: built-ins and plug-ins found and built one way, parameters, descriptions, changes."""

from __future__ import annotations

import re

import pytest

from contextdelta.context import (
    BUILTIN_STRATEGIES,
    STRATEGY_NAMES,
    StrategyError,
    StrategyServices,
    create_strategy,
    describe_strategy,
    parse_strategy_params,
    resolve_strategy,
    source_changes,
)
from contextdelta.providers import MockProvider

FIXTURE = "tests.context.plugin_fixture"


def test_every_builtin_resolves_with_its_own_name_and_declares_determinism() -> None:
    assert STRATEGY_NAMES == BUILTIN_STRATEGIES
    provider = MockProvider(["x"], model="m")
    for name in BUILTIN_STRATEGIES:
        strategy, description = describe_strategy(name, summary_provider=provider)
        assert strategy.name == description.name == name
        assert description.source.kind == "builtin" and description.source.source_sha256 is None
        assert description.deterministic is (name != "semantic_summary")
        assert description.config_hash == strategy.config_hash and description.spec == name


@pytest.mark.slow
def test_a_module_path_plugin_is_built_with_its_params_and_described() -> None:
    strategy, description = describe_strategy(f"{FIXTURE}:KeepFirstGroups", params={"count": 5})
    assert strategy.name == "keep_first" and strategy.params == {"count": 5}
    assert description.factory_params == {"count": 5} and description.deterministic is True
    source = description.source
    assert source.kind == "module" and source.target == f"{FIXTURE}:KeepFirstGroups"
    assert source.source_sha256 is not None and len(source.source_sha256) == 64
    assert description.spec == f"{FIXTURE}:KeepFirstGroups"
    # the shared settings of the built-ins never reach a plug-in
    assert create_strategy(f"{FIXTURE}:KeepFirstGroups", last_n=9).params == {"count": 2}


def test_a_factory_that_declares_services_gets_them() -> None:
    provider = MockProvider(["x"], model="m")
    strategy = create_strategy(f"{FIXTURE}:WithServices", summary_provider=provider, params={"level": 2})
    services = getattr(strategy, "services", None)
    assert isinstance(services, StrategyServices)
    # a plug-in's summary provider runs its calls on the episode's loop; the run's provider is inside it
    assert getattr(services.summary_provider, "wrapped", None) is provider


@pytest.mark.parametrize(
    ("spec", "params", "message"),
    [
        ("everything", {}, "unknown strategy 'everything'"),
        ("no_such_module.x:Factory", {}, "cannot import no_such_module.x"),
        (f"{FIXTURE}:Missing", {}, "has no callable 'Missing'"),
        (f"{FIXTURE}:", {}, "package.module:factory"),
        (f"{FIXTURE}:Undeclared", {}, "declare `deterministic = True`"),
        (f"{FIXTURE}:MisNamed", {}, "`name` attribute"),
        (f"{FIXTURE}:ShadowsBuiltin", {}, "the name of a built-in strategy"),
        (f"{FIXTURE}:not_a_strategy", {}, "lacks"),
        (f"{FIXTURE}:KeepFirstGroups", {"size": 3}, "has no parameter 'size' (it takes: count)"),
        ("last_n", {"n": -1}, "rejected its parameters"),
        ("full_history", {"n": 1}, "it takes: no parameters"),
        ("semantic_summary", {}, "needs a summary provider"),
        (
            "tests.context.plugin_exits_on_import:Anything",
            {},
            "cannot import tests.context.plugin_exits_on_import: SystemExit: 5",
        ),
        (f"{FIXTURE}:ExitsInFactory", {}, "strategy 'exits_in_factory': its factory failed: SystemExit: 7"),
        (f"{FIXTURE}:HashFails", {}, "strategy 'hash_fails': reading its config_hash failed: RuntimeError: hash boom"),
        (f"{FIXTURE}:NameFails", {}, "strategy 'name_fails': reading its name failed: RuntimeError: name boom"),
    ],
)
def test_bad_strategies_are_one_line_errors_naming_them(spec: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(StrategyError, match=re.escape(message)) as caught:
        create_strategy(spec, params=params)
    assert "\n" not in str(caught.value)


def test_strategy_params_parse_json_values_and_refuse_malformed_items() -> None:
    parsed = parse_strategy_params(["last_n.n=5", "keep_first.count=2", "x.flag=true", "x.label=hello", "x.l=[1,2]"])
    assert parsed == {
        "last_n": {"n": 5},
        "keep_first": {"count": 2},
        "x": {"flag": True, "label": "hello", "l": [1, 2]},
    }
    for bad in ("last_n=5", "last_n.=5", ".n=5", "last_n.n", "last_n.n-x=1"):
        with pytest.raises(StrategyError, match=re.escape("NAME.KEY=VALUE")):
            parse_strategy_params([bad])
    with pytest.raises(StrategyError, match="given twice"):
        parse_strategy_params(["last_n.n=1", "last_n.n=2"])


@pytest.mark.slow
def test_source_changes_names_a_changed_or_missing_plugin_and_ignores_builtins() -> None:
    _, builtin = describe_strategy("last_n")
    _, plugin = describe_strategy(f"{FIXTURE}:KeepFirstGroups")
    assert source_changes([builtin, plugin]) == []
    edited = plugin.model_copy(update={"source": plugin.source.model_copy(update={"source_sha256": "0" * 64})})
    (change,) = source_changes([edited])
    assert change.startswith("plug-in strategy 'keep_first'") and "source hash changed" in change
    gone = plugin.model_copy(update={"source": plugin.source.model_copy(update={"target": "gone_package.mod:Factory"})})
    (missing,) = source_changes([gone])
    assert "'keep_first'" in missing and "no longer available" in missing


def test_resolving_does_not_build() -> None:
    registered = resolve_strategy("typed_state_digest")
    assert registered.name == "typed_state_digest" and registered.source.kind == "builtin"


@pytest.mark.parametrize(
    ("spec", "params", "message"),
    [
        ("last_n", {"n": 2.5}, "last_n: n must be a whole number of tool groups, got 2.5"),
        ("last_n", {"n": True}, "last_n: n must be a whole number of tool groups, got True"),
        ("last_n", {"n": "abc"}, "last_n: n must be a whole number of tool groups, got 'abc'"),
        ("tool_result_clearing", {"keep": 2.5}, "keep must be a whole number of tool groups, got 2.5"),
        ("typed_state_digest", {"trigger": 1.5}, "trigger must be a whole number of tool groups, got 1.5"),
        (f"{FIXTURE}:RandomParams", {}, "its factory built it twice from the same parameters with different params"),
        (f"{FIXTURE}:NanParams", {}, "its params are not plain JSON data"),
    ],
)
def test_a_strategy_that_would_fail_every_episode_is_refused_when_built(
    spec: str, params: dict[str, object], message: str
) -> None:
    """Each of these passed before and then failed (or crashed) the run once its directory existed."""
    with pytest.raises(StrategyError, match=re.escape(message)):
        describe_strategy(spec, params=params)


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_a_strategy_param_that_is_not_a_finite_number_is_refused(raw: str) -> None:
    with pytest.raises(StrategyError, match=re.escape(f"{raw} is not a finite number")):
        parse_strategy_params([f"last_n.n={raw}"])


def test_a_plugin_error_of_megabytes_is_a_short_line() -> None:
    with pytest.raises(StrategyError) as caught:
        create_strategy(f"{FIXTURE}:FailsAtLength")
    message = str(caught.value)
    assert message.startswith("strategy 'fails_at_length': its factory failed: RuntimeError: no no")
    assert len(message) < 2_500 and "characters in all" in message
