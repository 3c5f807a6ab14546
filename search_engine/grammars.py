"""What a definition looks like in each tree-sitter grammar the chunker understands.

The chunking algorithm (`search_engine.chunking`) is one walk for every language; only the
node vocabulary differs, so it lives here as data: which node types define functions, which
define classes (or structs, traits, impl blocks: anything with members worth naming), which
define namespaces, which merely wrap a definition (decorators, `export`, `template<>`), and
how each names itself. Grammars come from the per-language wheels (`tree_sitter_python`
etc.), which embed the compiled parser, so nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from tree_sitter import Language, Node, Parser


class DefKind(str, Enum):
    FUNCTION = "function"
    CLASS = "class"
    NAMESPACE = "namespace"


@dataclass(frozen=True, slots=True)
class Definition:
    """A definition found at a node: the node that carries it (its span may include decorators
    or `export`), the inner node with the body, what kind it is and the name it defines."""

    outer: Node
    inner: Node
    kind: DefKind
    name: str | None


@dataclass(frozen=True, slots=True)
class LanguageSpec:
    module: str
    loader: str
    functions: frozenset[str]
    classes: frozenset[str]
    namespaces: frozenset[str] = frozenset()
    wrappers: frozenset[str] = frozenset()
    comments: frozenset[str] = frozenset({"comment"})
    # Node types (e.g. `const f = () => ...`) that define a function or class only when their
    # value is one; `_value_definition` decides.
    bindings: frozenset[str] = frozenset()


_JS_FUNCTIONS = frozenset({
    "function_declaration", "generator_function_declaration", "method_definition",
    "function_signature", "abstract_method_signature",
})
_JS_CLASSES = frozenset({
    "class_declaration", "abstract_class_declaration", "interface_declaration",
    "enum_declaration", "class",
})
_JS_BINDINGS = frozenset({"lexical_declaration", "variable_declaration", "expression_statement"})
_FUNCTION_VALUES = frozenset({
    "arrow_function", "function_expression", "function", "generator_function",
})
_C_FUNCTIONS = frozenset({"function_definition"})
_C_CLASSES = frozenset({"struct_specifier", "union_specifier", "enum_specifier"})

_TS = LanguageSpec(
    module="tree_sitter_typescript",
    loader="language_typescript",
    functions=_JS_FUNCTIONS,
    classes=_JS_CLASSES,
    namespaces=frozenset({"internal_module", "module"}),
    wrappers=frozenset({"export_statement", "ambient_declaration"}),
    bindings=_JS_BINDINGS,
)

SPECS: dict[str, LanguageSpec] = {
    "python": LanguageSpec(
        module="tree_sitter_python",
        loader="language",
        functions=frozenset({"function_definition"}),
        classes=frozenset({"class_definition"}),
        wrappers=frozenset({"decorated_definition"}),
    ),
    "javascript": LanguageSpec(
        module="tree_sitter_javascript",
        loader="language",
        functions=_JS_FUNCTIONS,
        classes=_JS_CLASSES,
        wrappers=frozenset({"export_statement"}),
        bindings=_JS_BINDINGS,
    ),
    "typescript": _TS,
    "tsx": replace(_TS, loader="language_tsx"),
    "go": LanguageSpec(
        module="tree_sitter_go",
        loader="language",
        functions=frozenset({"function_declaration", "method_declaration"}),
        classes=frozenset({"type_declaration"}),
    ),
    "rust": LanguageSpec(
        module="tree_sitter_rust",
        loader="language",
        functions=frozenset({"function_item", "function_signature_item", "macro_definition"}),
        classes=frozenset({"struct_item", "enum_item", "union_item", "trait_item", "impl_item"}),
        namespaces=frozenset({"mod_item"}),
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "java": LanguageSpec(
        module="tree_sitter_java",
        loader="language",
        functions=frozenset({"method_declaration", "constructor_declaration", "compact_constructor_declaration"}),
        classes=frozenset({
            "class_declaration", "interface_declaration", "enum_declaration",
            "record_declaration", "annotation_type_declaration",
        }),
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "c": LanguageSpec(
        module="tree_sitter_c",
        loader="language",
        functions=_C_FUNCTIONS,
        classes=_C_CLASSES,
        wrappers=frozenset({"type_definition"}),
    ),
    "cpp": LanguageSpec(
        module="tree_sitter_cpp",
        loader="language",
        functions=_C_FUNCTIONS,
        classes=_C_CLASSES | {"class_specifier"},
        namespaces=frozenset({"namespace_definition"}),
        wrappers=frozenset({"template_declaration", "type_definition"}),
    ),
}


def spec_for(language: str | None, path: str) -> LanguageSpec | None:
    """The grammar spec for a file, or None when the chunker has no grammar for it.

    `.tsx` needs the TSX grammar even if a caller labels it plain "typescript"."""
    if language in ("typescript", "tsx") and path.lower().endswith(".tsx"):
        return SPECS["tsx"]
    return SPECS.get(language or "")


_local = threading.local()


def parser_for(spec: LanguageSpec) -> Parser:
    """A parser for `spec`, one per thread (tree-sitter parsers are not thread-safe)."""
    cache: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    key = f"{spec.module}.{spec.loader}"
    parser = cache.get(key)
    if parser is None:
        grammar: Callable[[], object] = getattr(importlib.import_module(spec.module), spec.loader)
        parser = cache[key] = Parser(Language(grammar()))
    return parser


def definition_at(node: Node, spec: LanguageSpec) -> Definition | None:
    """The definition `node` makes, if any, seeing through wrappers and bindings."""
    inner = _unwrap(node, spec)
    if inner is None:
        return None
    kind = _kind_of(inner, spec)
    if kind is None:
        value = _value_definition(inner, spec)
        if value is None:
            return None
        return Definition(node, value[0], value[1], value[2])
    name = _name_of(inner)
    if name is None and node.type == "type_definition":  # C `typedef struct {...} name;`
        declarator = node.child_by_field_name("declarator")
        name = _text(declarator) if declarator is not None else None
    return Definition(node, inner, kind, name)


def _unwrap(node: Node, spec: LanguageSpec) -> Node | None:
    seen = 0
    while node.type in spec.wrappers and seen < 4:
        inner = next(
            (c for c in node.named_children
             if c.type in spec.wrappers or _kind_of(c, spec) or c.type in spec.bindings),
            None,
        )
        if inner is None:
            return None
        node, seen = inner, seen + 1
    return node


def _kind_of(node: Node, spec: LanguageSpec) -> DefKind | None:
    t = node.type
    if t in spec.functions:
        return DefKind.FUNCTION
    if t in spec.classes:
        # `struct foo x;` or a bare `enum E` reference has no body: not a definition.
        return DefKind.CLASS if _has_body(node) else None
    if t in spec.namespaces:
        return DefKind.NAMESPACE
    return None


def _has_body(node: Node) -> bool:
    return node.type in ("type_declaration", "impl_item") or node.child_by_field_name("body") is not None


def _value_definition(node: Node, spec: LanguageSpec) -> tuple[Node, DefKind, str | None] | None:
    """`const f = () => ...`, `exports.f = function ...`, TS `namespace N {...}`: the binding
    defines what its value is, under the bound name."""
    if node.type not in spec.bindings:
        return None
    named = node.named_children
    if node.type == "expression_statement":
        if len(named) != 1:
            return None
        target = named[0]
        if target.type in spec.namespaces:
            return target, DefKind.NAMESPACE, _name_of(target)
        if target.type != "assignment_expression":
            return None
        left, right = target.child_by_field_name("left"), target.child_by_field_name("right")
        if left is None or right is None or left.end_byte - left.start_byte > 80:
            return None
        kind = _value_kind(right, spec)
        return (right, kind, _text(left)) if kind else None
    declarators = [c for c in named if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None:
        return None
    kind = _value_kind(value, spec)
    return (value, kind, _name_of(declarators[0])) if kind else None


def _value_kind(value: Node, spec: LanguageSpec) -> DefKind | None:
    if value.type in _FUNCTION_VALUES:
        return DefKind.FUNCTION
    if value.type in spec.classes:
        return DefKind.CLASS
    return None


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


# Declarator wrappers in C/C++ between a function definition and its name.
_DECLARATOR_HOPS = frozenset({
    "function_declarator", "pointer_declarator", "reference_declarator", "parenthesized_declarator",
    "attributed_declarator",
})


def _name_of(node: Node) -> str | None:
    """The name a definition node introduces, or None for anonymous ones."""
    t = node.type
    if t == "method_declaration" and node.child_by_field_name("receiver") is not None:
        return _go_method_name(node)
    if t == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        return _name_of(spec) if spec is not None else None
    if t == "impl_item":
        target = node.child_by_field_name("type")
        return _type_name(target) if target is not None else None
    if t == "function_definition" and node.child_by_field_name("declarator") is not None:
        return _declarator_name(node.child_by_field_name("declarator"))
    name = node.child_by_field_name("name")
    return _text(name) if name is not None else None


def _declarator_name(node: Node | None) -> str | None:
    hops = 0
    while node is not None and node.type in _DECLARATOR_HOPS and hops < 8:
        node = node.child_by_field_name("declarator") or (node.named_children[0] if node.named_children else None)
        hops += 1
    if node is None:
        return None
    # `Foo::bar` is qualified in the source; the chunker qualifies with ".", so match it.
    return _text(node).replace("::", ".")


def _go_method_name(node: Node) -> str | None:
    name = node.child_by_field_name("name")
    receiver = node.child_by_field_name("receiver")
    param = next((c for c in receiver.named_children if c.type == "parameter_declaration"), None) if receiver else None
    rtype = param.child_by_field_name("type") if param is not None else None
    method = _text(name) if name is not None else None
    if rtype is None or method is None:
        return method
    return f"{_type_name(rtype)}.{method}"


def _type_name(node: Node) -> str:
    """`*Server` -> `Server`, `Vec<T>` -> `Vec`, `a::B` -> `B`: the bare type a member hangs on."""
    hops = 0
    while node.type in ("pointer_type", "generic_type", "reference_type", "scoped_type_identifier") and hops < 6:
        inner = node.child_by_field_name("type") or node.child_by_field_name("name")
        if inner is None:
            inner = next((c for c in node.named_children if "type" in c.type or c.type == "identifier"), None)
        if inner is None:
            break
        node, hops = inner, hops + 1
    return _text(node)
