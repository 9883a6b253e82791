"""Validation errors of pydantic models (the executor kinds' configs, skills) in the platform's
own words: the one place they become the messages pages, the admin and the commands show.

Each message names what it is about (a field's label, a config key, `tags #2`) and the rule
it breaks ("must be at most 2000 characters long"); none carries pydantic's own phrasing
("Input should be ...", "Value error, ...").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic import ValidationError as PydanticValidationError
from pydantic_core import ErrorDetails

# Rules that need no numbers from the error's context.
_PLAIN = {
    "missing": "is required",
    "string_type": "must be text",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a JSON object",
    "list_type": "must be a list",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "string_pattern_mismatch": "is not in the expected form",
}


def where(loc: Sequence[int | str]) -> str:
    """A location as people read it: names joined by dots, list positions counted from 1
    (`tags #2`)."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f" #{part + 1}"
        else:
            text += f".{part}" if text else str(part)
    return text.strip()


def _count(value: Any) -> str:
    """A bound as people write it: 2 rather than 2.0, 2,000 rather than 2000."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "?", "!")) else text + "."


def rule_of(error: ErrorDetails, *, known: Collection[str] = ()) -> str:
    """What the value must be, without the subject: "must be at most 200 characters long"."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "extra_forbidden":
        return "is not a known field" + (f"; the fields are {', '.join(known)}" if known else "")
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {_count(least)} characters"
    if kind == "string_too_long":
        has = f" (it has {_count(len(value))})" if isinstance(value, str) else ""
        return f"must be at most {_count(ctx.get('max_length'))} characters long{has}"
    if kind in ("too_long", "too_short"):
        bound = "at most" if kind == "too_long" else "at least"
        limit = ctx.get("max_length" if kind == "too_long" else "min_length")
        actual = ctx.get("actual_length")
        if actual is None and isinstance(value, list | dict):
            actual = len(value)
        has = f" (it has {_count(actual)})" if actual is not None else ""
        if kind == "too_short" and limit == 1:
            return f"must have at least one item{has}"
        return f"must have {bound} {_count(limit)} items{has}"
    if kind == "greater_than_equal":
        return f"must be greater than or equal to {_count(ctx.get('ge'))}"
    if kind == "greater_than":
        return f"must be greater than {_count(ctx.get('gt'))}"
    if kind == "less_than_equal":
        return f"must be less than or equal to {_count(ctx.get('le'))}"
    if kind == "less_than":
        return f"must be less than {_count(ctx.get('lt'))}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    message = str(error.get("msg", ""))
    if message.startswith("Input should be "):
        return "must be " + message.removeprefix("Input should be ")
    return "is not valid" + (f": {message}" if message else "")


def problem_text(error: ErrorDetails, subject: str, *, known: Collection[str] = ()) -> str:
    """One error as a sentence about `subject`: "Temperature must be less than or equal to 2."
    A rule the platform wrote itself (a validator's ValueError) keeps its words after the
    subject."""
    if error["type"] in ("value_error", "assertion_error"):
        reason = (error.get("ctx") or {}).get("error")
        text = str(reason) if reason is not None else str(error.get("msg", ""))
        text = text.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return _sentence(f"{subject}: {text}" if subject else text)
    rule = rule_of(error, known=known)
    return _sentence(f"{subject} {rule}" if subject else rule[:1].upper() + rule[1:])


def problems(
    exc: PydanticValidationError,
    *,
    prefix: str = "",
    whole: str = "The value",
    known: Collection[str] = (),
) -> list[str]:
    """Every error of `exc` as a sentence, each about the location it names (`whole` when it
    names none), after `prefix` (e.g. "Skill #2:")."""
    found = []
    for error in exc.errors():
        subject = where(error["loc"]) or whole
        text = problem_text(error, subject, known=known)
        found.append(f"{prefix} {text}" if prefix else text)
    return found
