"""Config world tools: typed settings and percentage rollouts, refused while a key is frozen."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contextdelta.worlds.config.data_model import ConfigValue, Environment, Flag, Setting, setting_id
from contextdelta.worlds.model import ToolKind
from contextdelta.worlds.tools import GuardViolation, ToolArgs, ToolContext, tool


class SettingRef(ToolArgs):
    environment: Environment = Field(description="'staging' or 'prod'.")
    key: str = Field(description="The config key, e.g. 'payments.retry_limit'.")


def _setting(args: SettingRef) -> tuple[str, str]:
    return ("setting", setting_id(args.environment, args.key))


class FlagRef(ToolArgs):
    environment: Environment = Field(description="'staging' or 'prod'.")
    flag: str = Field(description="The feature flag name, e.g. 'new_checkout_flow'.")


def _flag(args: FlagRef) -> tuple[str, str]:
    return ("flag", setting_id(args.environment, args.flag))


class ListConfigsArgs(ToolArgs):
    environment: Environment = Field(description="'staging' or 'prod'.")
    prefix: str | None = Field(default=None, description="Only keys starting with this prefix, e.g. 'payments.'.")


class ListFlagsArgs(ToolArgs):
    environment: Environment = Field(description="'staging' or 'prod'.")


class SetConfigArgs(SettingRef):
    value: ConfigValue = Field(description="The new value; must match the key's value_type.")


class RolloutArgs(FlagRef):
    percentage: int = Field(description="Share of traffic that gets the flag, 0-100 (0 turns it off).")


def _writable(kind: str, ident: str, frozen: bool, reason: str | None) -> None:
    if frozen:
        raise GuardViolation("key_frozen", f"{kind} {ident} is under a change freeze: {reason or 'no reason given'}.")


@tool(ToolKind.READ, resource=_setting)
def get_config(ctx: ToolContext, args: SettingRef) -> Any:
    """Get one config key in an environment: value, type, owner, freeze status and current version."""
    return {"setting": ctx.ref(Setting, setting_id(args.environment, args.key))}


@tool(ToolKind.READ)
def list_configs(ctx: ToolContext, args: ListConfigsArgs) -> Any:
    """List the config keys of an environment (deleted keys are left out), each with its current version."""
    found = [
        ctx.ref(Setting, sid)
        for sid, s in ctx.all(Setting)
        if s.environment == args.environment
        and not s.deleted
        and (args.prefix is None or s.key.startswith(args.prefix))
    ]
    return {"settings": found, "count": len(found)}


@tool(ToolKind.READ, resource=_flag)
def get_flag(ctx: ToolContext, args: FlagRef) -> Any:
    """Get one feature flag in an environment: enabled, rollout percentage, owner, freeze status, version."""
    return {"flag": ctx.ref(Flag, setting_id(args.environment, args.flag))}


@tool(ToolKind.READ)
def list_flags(ctx: ToolContext, args: ListFlagsArgs) -> Any:
    """List the feature flags of an environment, each with its current version."""
    found = [ctx.ref(Flag, fid) for fid, f in ctx.all(Flag) if f.environment == args.environment]
    return {"flags": found, "count": len(found)}


@tool(ToolKind.WRITE, resource=_setting, effect=("environment", "key", "value"))
def set_config(ctx: ToolContext, args: SetConfigArgs) -> Any:
    """Set the value of an existing config key. The value must match the key's declared type."""
    sid = setting_id(args.environment, args.key)
    setting = ctx.get(Setting, sid)
    _writable("config key", sid, setting.frozen, setting.freeze_reason)
    if setting.deleted:
        raise GuardViolation("key_deleted", f"config key {sid} was deleted; it cannot be set.")
    if not setting.value_type.accepts(args.value):
        raise GuardViolation(
            "type_mismatch",
            f"{sid} holds a {setting.value_type.value}; {args.value!r} is not one.",
            value_type=setting.value_type.value,
        )
    previous = setting.value
    setting.value = args.value
    return {"previous_value": previous, "setting": ctx.put(sid, setting)}


@tool(ToolKind.WRITE, resource=_setting, effect=("environment", "key"))
def delete_config(ctx: ToolContext, args: SettingRef) -> Any:
    """Delete a config key from an environment."""
    sid = setting_id(args.environment, args.key)
    setting = ctx.get(Setting, sid)
    _writable("config key", sid, setting.frozen, setting.freeze_reason)
    if setting.deleted:
        raise GuardViolation("key_deleted", f"config key {sid} is already deleted.")
    setting.deleted = True
    setting.value = None
    return {"setting": ctx.put(sid, setting)}


@tool(ToolKind.WRITE, resource=_flag, effect=("environment", "flag", "percentage"))
def rollout_flag(ctx: ToolContext, args: RolloutArgs) -> Any:
    """Set the rollout percentage of a feature flag (0-100; 0 disables it, anything above enables it)."""
    fid = setting_id(args.environment, args.flag)
    flag = ctx.get(Flag, fid)
    _writable("flag", fid, flag.frozen, flag.freeze_reason)
    if not 0 <= args.percentage <= 100:
        raise GuardViolation("invalid_percentage", f"percentage must be between 0 and 100, not {args.percentage}.")
    previous = flag.rollout_percent
    flag.rollout_percent = args.percentage
    flag.enabled = args.percentage > 0
    return {"previous_percent": previous, "flag": ctx.put(fid, flag)}


TOOLS = (get_config, list_configs, get_flag, list_flags, set_config, delete_config, rollout_flag)
