"""Derive argparse flags from pydantic settings models, so there is one definition.

Each field names its flags in ``json_schema_extra={"flags": [...]}`` (a boolean may also
name ``"off_flags"`` that set it False, as llama-server's ``-no-kvu``); the
description becomes the help text and the value is validated by the model
itself, so bounds live in one place. :func:`settings_argv` goes the other way:
a settings instance back to the command line that gives it.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Collection
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from backend.core.errors import ConfigError

T = TypeVar("T", bound=BaseSettings)


def _flags_of(field: FieldInfo, key: str = "flags") -> list[str]:
    extra = field.json_schema_extra or {}
    flags = extra.get(key) if isinstance(extra, dict) else None
    return [str(flag) for flag in flags] if isinstance(flags, list) else []


def _help(field: FieldInfo) -> str:
    """The field's description with its default, as ``serve --help`` shows it."""
    text = str(field.description or "")
    default = field.get_default(call_default_factory=True)
    if default is None or default == [] or default is False:
        return text
    return f"{text} (default: {default})"


def add_settings_flags(
    parser: argparse.ArgumentParser, model: type[BaseModel], skip: Collection[str] = ()
) -> None:
    """Add one option per field of ``model`` that declares flags (except the ``skip`` ones).

    Options default to ``argparse.SUPPRESS`` so that only what the user typed
    overrides the environment and the field defaults.
    """
    group = parser.add_argument_group(model.__name__)
    for name, field in model.model_fields.items():
        flags = _flags_of(field)
        if not flags or name in skip:
            continue
        annotation = field.annotation
        origin = typing.get_origin(annotation)
        kwargs: dict[str, Any] = {
            "dest": name,
            "default": argparse.SUPPRESS,
            "help": _help(field),
        }
        if annotation is bool:
            kwargs["action"] = "store_true"
        elif origin is list:
            kwargs["action"] = "append"
            kwargs["metavar"] = name.upper().rstrip("S")
        else:
            choices = typing.get_args(annotation) if origin is typing.Literal else None
            if choices:
                kwargs["choices"] = list(choices)
            kwargs["metavar"] = name.upper() if not choices else None
            if kwargs["metavar"] is None:
                del kwargs["metavar"]
        group.add_argument(*flags, **kwargs)
        off_flags = _flags_of(field, "off_flags")
        if annotation is bool and off_flags:
            group.add_argument(
                *off_flags,
                dest=name,
                action="store_false",
                default=argparse.SUPPRESS,
                help=f"the opposite of {flags[-1]}",
            )


def settings_argv(settings: BaseModel, skip: Collection[str] = ()) -> list[str]:
    """The flags that give every flagged field of ``settings`` its value, defaults included,
    except the fields named in ``skip``.

    Each field is written with its last (long) flag; ``None``, ``False`` and ``""`` are
    written as no flag, a list as the flag repeated, and a value that starts with ``-``
    as ``--flag=value`` so that it cannot be read as an option.
    """
    argv: list[str] = []
    for name, field in type(settings).model_fields.items():
        flags = _flags_of(field)
        value = getattr(settings, name)
        if not flags or name in skip or value is None or value is False or value == "":
            continue
        flag = flags[-1]
        if value is True:
            argv.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            text = str(item)
            argv += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    return argv


def settings_from_args(model: type[T], args: argparse.Namespace) -> T:
    """Build ``model`` from environment + the flags the user passed."""
    overrides = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return model(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        if not first["loc"]:  # a check across fields names its flags itself
            raise ConfigError(message) from None
        field = str(first["loc"][0])
        flags = _flags_of(model.model_fields[field]) if field in model.model_fields else []
        label = flags[-1] if flags else field
        raise ConfigError(f"invalid {label}: {message}") from None


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (the sub-commands' counts and sizes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
