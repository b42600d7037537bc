"""Config world: every tool, every guard, in both protection modes."""

from __future__ import annotations

import json

import pytest

from contextdelta.worlds import Outcome, ProtectionMode
from tests.worlds.helpers import error_code, make_world, read, write

RETRY = "config/setting/prod:payments.retry_limit"
CHECKOUT = "config/flag/prod:new_checkout"


def test_reads_return_versions() -> None:
    world = make_world("config")
    assert read(world, "get_config", environment="prod", key="payments.retry_limit")["setting"]["value"] == 3
    keys = [s["key"] for s in read(world, "list_configs", environment="prod")["settings"]]
    assert keys == ["billing.currency", "payments.retry_limit", "search.timeout_ms"]
    assert read(world, "list_configs", environment="prod", prefix="pay")["count"] == 1
    assert read(world, "get_flag", environment="prod", flag="new_checkout")["flag"]["rollout_percent"] == 10
    assert read(world, "list_flags", environment="prod")["count"] == 2


def test_set_config_and_type_checks(mode: ProtectionMode) -> None:
    world = make_world("config", mode)
    ok = write(world, "set_config", RETRY, environment="prod", key="payments.retry_limit", value=5)
    body = json.loads(ok.content)
    assert (body["previous_value"], body["setting"]["value"], body["setting"]["version"]) == (3, 5, 2)
    for bad in ("5", 5.5, True):
        result = write(world, "set_config", RETRY, environment="prod", key="payments.retry_limit", value=bad)
        assert (result.event.outcome, error_code(result)) == (Outcome.REJECTED, "type_mismatch"), bad
    number = write(
        world,
        "set_config",
        "config/setting/prod:search.timeout_ms",
        environment="prod",
        key="search.timeout_ms",
        value=300,
    )
    assert number.event.outcome is Outcome.EXECUTED


def test_frozen_keys_refuse_every_write(mode: ProtectionMode) -> None:
    world = make_world("config", mode)
    before = world.state_hash()
    frozen_set = write(
        world,
        "set_config",
        "config/setting/prod:billing.currency",
        environment="prod",
        key="billing.currency",
        value="EUR",
    )
    frozen_delete = write(
        world, "delete_config", "config/setting/prod:billing.currency", environment="prod", key="billing.currency"
    )
    frozen_flag = write(
        world, "rollout_flag", "config/flag/prod:dark_mode", environment="prod", flag="dark_mode", percentage=50
    )
    for result in (frozen_set, frozen_delete, frozen_flag):
        assert (result.event.outcome, error_code(result)) == (Outcome.REJECTED, "key_frozen")
    assert world.state_hash() == before


def test_delete_config_then_writes_are_refused(mode: ProtectionMode) -> None:
    world = make_world("config", mode)
    deleted = write(world, "delete_config", RETRY, environment="prod", key="payments.retry_limit")
    assert json.loads(deleted.content)["setting"]["deleted"] is True
    assert read(world, "list_configs", environment="prod", prefix="payments.")["count"] == 0
    for tool, extra in (("delete_config", {}), ("set_config", {"value": 4})):
        again = write(world, tool, RETRY, environment="prod", key="payments.retry_limit", **extra)
        assert (again.event.outcome, error_code(again)) == (Outcome.REJECTED, "key_deleted")


@pytest.mark.parametrize(("percentage", "enabled"), [(0, False), (100, True), (35, True)])
def test_rollout_flag(mode: ProtectionMode, percentage: int, enabled: bool) -> None:
    world = make_world("config", mode)
    result = write(world, "rollout_flag", CHECKOUT, environment="prod", flag="new_checkout", percentage=percentage)
    body = json.loads(result.content)
    assert (body["previous_percent"], body["flag"]["rollout_percent"], body["flag"]["enabled"]) == (
        10,
        percentage,
        enabled,
    )


@pytest.mark.parametrize("percentage", [-1, 101, 250])
def test_rollout_outside_0_to_100_is_rejected(mode: ProtectionMode, percentage: int) -> None:
    world = make_world("config", mode)
    result = write(world, "rollout_flag", CHECKOUT, environment="prod", flag="new_checkout", percentage=percentage)
    assert (result.event.outcome, error_code(result)) == (Outcome.REJECTED, "invalid_percentage")


def test_unknown_environment_is_invalid() -> None:
    world = make_world("config")
    result = world.call("get_config", {"environment": "qa", "key": "payments.retry_limit"})
    assert (result.event.outcome, error_code(result)) == (Outcome.INVALID, "invalid_arguments")
