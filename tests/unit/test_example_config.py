"""config/drkit.example.yaml against the model: no key drkit does not read, no wrong default.

The example shows every key.  A value is the model's default unless its line carries
``# default: <yaml>``, in which case the value is an illustration and the comment must name the
model's default.  And every key shown must be read by drkit's code somewhere (an attribute
access outside the model module), so the example never documents a setting that does nothing.
"""

from __future__ import annotations

import ast
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

from drkit.config.model import DrkitConfig
from drkit.health.observations import measures

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "drkit.example.yaml"
_DEFAULT_COMMENT = re.compile(r"\s#\s*default:\s*(?P<value>.+?)\s*$")

# Keys whose use is not an attribute read, each with the reason.
NOT_READ_BY_ATTRIBUTE = {
    "version": "validated by its Literal[1] type at load; there is no other version to act on",
    "principals": "read through ClusterConfig.principal(role) (drkit.access: acls, doctor)",
}
# Keys read by code another engineer is landing; remove an entry once that code is merged.
PENDING_READERS: dict[str, str] = {}


@dataclass(frozen=True)
class Shown:
    """One key of the example: where, which model field, its value and its default comment."""

    path: str
    line: int
    model: type[BaseModel]
    field: str
    value: Any
    default_comment: str | None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside ``dict[str, M]`` or ``tuple[M, ...]``, if any."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict and len(args) == 2:
        return _model_of(args[1])
    if typing.get_origin(annotation) is tuple and args:
        return _model_of(args[0])
    return None


def walk(
    model: type[BaseModel],
    node: yaml.MappingNode,
    data: dict[str, Any],
    path: str,
    lines: list[str],
) -> list[Shown]:
    shown: list[Shown] = []
    for key_node, value_node in node.value:
        name = key_node.value
        where = f"{path}.{name}" if path else name
        assert name in model.model_fields, f"{where}: {model.__name__} has no field {name!r}"
        annotation = model.model_fields[name].annotation
        value = data[name]
        line = key_node.start_mark.line
        comment = _DEFAULT_COMMENT.search(lines[line])
        shown.append(
            Shown(where, line + 1, model, name, value, comment["value"] if comment else None)
        )
        nested, item = _model_of(annotation), _item_model(annotation)
        if nested is not None and isinstance(value_node, yaml.MappingNode):
            shown.extend(walk(nested, value_node, value, where, lines))
        elif item is not None and isinstance(value_node, yaml.MappingNode):
            for k, v in value_node.value:
                shown.extend(walk(item, v, value[k.value], f"{where}.{k.value}", lines))
        elif item is not None and isinstance(value_node, yaml.SequenceNode):
            for index, v in enumerate(value_node.value):
                shown.extend(walk(item, v, value[index], f"{where}[{index}]", lines))
    return shown


def example_keys() -> list[Shown]:
    text = EXAMPLE.read_text()
    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)
    return walk(DrkitConfig, root, yaml.safe_load(text), "", text.splitlines())


def _json(model: type[BaseModel], field: str, value: Any) -> Any:
    annotation = model.model_fields[field].annotation
    assert annotation is not None
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    return adapter.dump_python(adapter.validate_python(value), mode="json")


def _is_leaf(key: Shown) -> bool:
    annotation = key.model.model_fields[key.field].annotation
    if _model_of(annotation) is not None:
        return False
    return _item_model(annotation) is None or key.value in ([], {})


def test_every_default_the_example_shows_is_the_models_default() -> None:
    wrong: list[str] = []
    for key in example_keys():
        info = key.model.model_fields[key.field]
        default = info.get_default(call_default_factory=True)
        if not _is_leaf(key):
            assert key.default_comment is None, f"line {key.line}: comment on a section"
            continue
        if default is PydanticUndefined:
            assert key.default_comment is None, f"{key.path} is required, it has no default"
            continue
        expected = _json(key.model, key.field, default)
        if key.default_comment is not None:
            named = _json(key.model, key.field, yaml.safe_load(key.default_comment))
            if named != expected:
                wrong.append(f"line {key.line} {key.path}: says default {named!r}, is {expected!r}")
        elif _json(key.model, key.field, key.value) != expected:
            wrong.append(
                f"line {key.line} {key.path}: shows {key.value!r}, the default is {expected!r} "
                "(fix it, or mark the line '# default: ...')"
            )
    assert not wrong, "\n".join(wrong)


def _attributes_read(root: Path, skip: Path) -> set[str]:
    names: set[str] = set()
    for file in root.rglob("*.py"):
        if file == skip:
            continue
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def _read_through_bounds() -> set[str]:
    """The policy fields readiness reads by a flow observation field's declared ``Bound``
    (drkit.health.observations) rather than by attribute."""
    return {known.bound.key.split(".", 1)[1] for _, known in measures() if known.bound is not None}


def test_every_bound_names_a_field_of_its_policy() -> None:
    # A Bound's key is read with getattr: a renamed policy field must fail here, not at run time.
    sections = {name: DrkitConfig.model_fields[name].annotation for name in ("failover", "health")}
    for name, known in measures():
        if known.bound is None:
            continue
        section, key = known.bound.key.split(".", 1)
        policy = sections[section]
        assert isinstance(policy, type) and key in policy.model_fields, (name, known.bound.key)


def test_every_key_the_example_shows_is_read_by_the_code() -> None:
    read = _attributes_read(REPO / "drkit", skip=REPO / "drkit" / "config" / "model.py")
    read |= _read_through_bounds()
    unread = sorted(
        {
            f"{key.model.__name__}.{key.field} ({key.path})"
            for key in example_keys()
            if key.field not in read
            and key.field not in NOT_READ_BY_ATTRIBUTE
            and key.field not in PENDING_READERS
        }
    )
    assert not unread, f"keys no code reads: {unread}"


def test_the_walk_covers_every_model_field_in_the_example() -> None:
    # Every field of every model the example reaches is shown (the example documents all keys).
    seen: dict[type[BaseModel], set[str]] = {}
    for key in example_keys():
        seen.setdefault(key.model, set()).add(key.field)
    missing = sorted(
        f"{model.__name__}.{name}"
        for model, fields in seen.items()
        for name in model.model_fields
        if name not in fields
    )
    # Settings that need files (TLS client certificates, a password file) are shown as comments.
    commented = {
        "SecurityConfig.password_file",
        "SecurityConfig.ssl_certificate_location",
        "SecurityConfig.ssl_key_location",
        "SecurityConfig.ssl_key_password",
        "SecurityConfig.oauth",  # an alternative to username/password
        "ClusterConfig.role_security",  # its credentials would need files or more variables
        "DrkitConfig.signing",  # its secret would need one more variable or a file
    }
    assert set(missing) <= commented, set(missing) - commented
