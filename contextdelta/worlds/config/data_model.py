"""Config world resources: typed settings and rollout flags per environment, with owners and freezes."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from contextdelta.worlds.model import ResourceModel

Environment = Literal["staging", "prod"]
ConfigValue = StrictBool | StrictInt | StrictFloat | StrictStr


class ValueType(StrEnum):
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    STRING = "string"

    def accepts(self, value: object) -> bool:
        if self is ValueType.BOOLEAN:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        if self is ValueType.INTEGER:
            return isinstance(value, int)
        if self is ValueType.NUMBER:
            return isinstance(value, int | float)
        return isinstance(value, str)


def setting_id(environment: str, key: str) -> str:
    """Resource id of a setting or flag: ``environment:key``."""
    return f"{environment}:{key}"


class Setting(ResourceModel):
    kind: ClassVar[str] = "setting"

    environment: Environment
    key: str
    value_type: ValueType
    value: ConfigValue | None
    owner: str
    description: str = ""
    frozen: bool = False
    freeze_reason: str | None = None
    deleted: bool = False

    @model_validator(mode="after")
    def _typed(self) -> Setting:
        if self.value is not None and not self.value_type.accepts(self.value):
            raise ValueError(f"value {self.value!r} is not of type {self.value_type.value}")
        return self


class Flag(ResourceModel):
    kind: ClassVar[str] = "flag"

    environment: Environment
    name: str
    enabled: bool
    rollout_percent: int = Field(ge=0, le=100)
    owner: str
    description: str = ""
    frozen: bool = False
    freeze_reason: str | None = None
