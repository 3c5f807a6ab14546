"""What a definition looks like in each tree-sitter grammar the chunker understands.

The chunking algorithm (`search_engine.chunking.chunker`) is one walk for every language; only the
node vocabulary differs, so it lives here as data: which node types define functions, which
define classes (or structs, traits, impl blocks: anything with members worth naming), which
define namespaces, which merely wrap a definition (decorators, `export`, `template<>`), and
how each names itself, and which nodes lead into a definition and belong with it (doc
comments, and attributes such as Rust's `#[derive]` or Elixir's `@doc`). Grammars come from the
per-language wheels (`tree_sitter_python` etc.), which embed the compiled parser, so nothing is
downloaded at run time.

Names come from the node's `name` field where the grammar has one; otherwise from the first
identifier-like child, looking through the few nodes that hold a name (`let_binding`,
`signature`, `call_expression`...). Qualified names are written with "." whatever the language
(`Sinatra::Base`, `M:method` -> `Sinatra.Base`, `M.method`), as the chunker qualifies members.
"""

from __future__ import annotations

import importlib
import re
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
    loader: str = "language"
    functions: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    wrappers: frozenset[str] = frozenset()
    comments: frozenset[str] = frozenset({"comment"})
    # Node types (e.g. `const f = () => ...`) that define a function or class only when their
    # value is one; `_value_definition` decides.
    bindings: frozenset[str] = frozenset()
    # Non-comment nodes that lead into the next definition and belong with it (attributes,
    # annotations, type signatures), and a test for the ones a type alone cannot tell.
    leading: frozenset[str] = frozenset()
    is_leading: Callable[[Node], bool] | None = None
    # For grammars where a definition is a call (Elixir's `def name do ... end`): the kind and
    # name it defines, or None.
    definer: Callable[[Node], tuple[DefKind, str | None] | None] | None = None
    # Top-level nodes that only group the file's declarations (Haskell's `declarations`): their
    # children are walked as the file's own.
    containers: frozenset[str] = frozenset()


_JS_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "function_signature",
        "abstract_method_signature",
    }
)
_JS_CLASSES = frozenset(
    {
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "class",
    }
)
_JS_BINDINGS = frozenset({"lexical_declaration", "variable_declaration", "expression_statement"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_FACTORY_VALUES = frozenset({"call_expression", "new_expression", "await_expression"})
_C_FUNCTIONS = frozenset({"function_definition"})
_C_CLASSES = frozenset({"struct_specifier", "union_specifier", "enum_specifier"})

_TS = LanguageSpec(
    module="tree_sitter_typescript",
    loader="language_typescript",
    functions=_JS_FUNCTIONS,
    classes=_JS_CLASSES | {"type_alias_declaration"},
    namespaces=frozenset({"internal_module", "module"}),
    wrappers=frozenset({"export_statement", "ambient_declaration"}),
    bindings=_JS_BINDINGS,
)

SPECS: dict[str, LanguageSpec] = {
    "python": LanguageSpec(
        module="tree_sitter_python",
        functions=frozenset({"function_definition"}),
        classes=frozenset({"class_definition"}),
        wrappers=frozenset({"decorated_definition"}),
    ),
    "javascript": LanguageSpec(
        module="tree_sitter_javascript",
        functions=_JS_FUNCTIONS,
        classes=_JS_CLASSES,
        wrappers=frozenset({"export_statement"}),
        bindings=_JS_BINDINGS,
    ),
    "typescript": _TS,
    "tsx": replace(_TS, loader="language_tsx"),
    "go": LanguageSpec(
        module="tree_sitter_go",
        functions=frozenset({"function_declaration", "method_declaration"}),
        classes=frozenset({"type_declaration"}),
    ),
    "rust": LanguageSpec(
        module="tree_sitter_rust",
        functions=frozenset({"function_item", "function_signature_item", "macro_definition"}),
        classes=frozenset({"struct_item", "enum_item", "union_item", "trait_item", "impl_item"}),
        namespaces=frozenset({"mod_item"}),
        comments=frozenset({"line_comment", "block_comment"}),
        leading=frozenset({"attribute_item"}),  # `#[derive(...)]` between `///` and the item
    ),
    "java": LanguageSpec(
        module="tree_sitter_java",
        functions=frozenset({"method_declaration", "constructor_declaration", "compact_constructor_declaration"}),
        classes=frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
            }
        ),
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "c": LanguageSpec(
        module="tree_sitter_c",
        functions=_C_FUNCTIONS,
        classes=_C_CLASSES,
        wrappers=frozenset({"type_definition"}),
    ),
    "cpp": LanguageSpec(
        module="tree_sitter_cpp",
        functions=_C_FUNCTIONS,
        classes=_C_CLASSES | {"class_specifier"},
        namespaces=frozenset({"namespace_definition"}),
        wrappers=frozenset({"template_declaration", "type_definition"}),
    ),
}


def _elixir_call(node: Node) -> tuple[Node, str] | None:
    """(arguments, keyword) of an Elixir `keyword args do ... end` call, or None."""
    if node.type != "call":
        return None
    target = node.child_by_field_name("target")
    args = next((c for c in node.named_children if c.type == "arguments"), None)
    if target is None or target.type != "identifier" or args is None:
        return None
    return args, _text(target)


_ELIXIR_MODULES = frozenset({"defmodule", "defprotocol", "defimpl"})
_ELIXIR_FUNCTIONS = frozenset(
    {
        "def",
        "defp",
        "defmacro",
        "defmacrop",
        "defguard",
        "defguardp",
        "defdelegate",
        "defn",
        "defnp",
    }
)
# `@doc`, `@spec`... document the definition that follows; `@moduledoc` stays with its module.
_ELIXIR_LEADING = frozenset({"doc", "spec", "impl", "deprecated", "since", "dialyzer"})


def _elixir_definer(node: Node) -> tuple[DefKind, str | None] | None:
    call = _elixir_call(node)
    if call is None:
        return None
    args, keyword = call
    if keyword in _ELIXIR_MODULES:
        first = args.named_children[0] if args.named_children else None
        return DefKind.NAMESPACE, _text(first) if first is not None else None
    if keyword not in _ELIXIR_FUNCTIONS:
        return None
    head = args.named_children[0] if args.named_children else None
    if head is not None and head.type == "binary_operator":  # `def f(x) when guard`
        head = head.child_by_field_name("left")
    if head is not None and head.type == "call":
        head = head.child_by_field_name("target")
    return DefKind.FUNCTION, _text(head) if head is not None and head.type == "identifier" else None


def _elixir_leading(node: Node) -> bool:
    if node.type != "unary_operator":
        return False
    operand = node.child_by_field_name("operand")
    call = _elixir_call(operand) if operand is not None else None
    return call is not None and call[1] in _ELIXIR_LEADING


SPECS.update(
    {
        "csharp": LanguageSpec(
            module="tree_sitter_c_sharp",
            functions=frozenset(
                {
                    "method_declaration",
                    "constructor_declaration",
                    "destructor_declaration",
                    "operator_declaration",
                    "local_function_statement",
                }
            ),
            classes=frozenset(
                {
                    "class_declaration",
                    "interface_declaration",
                    "struct_declaration",
                    "enum_declaration",
                    "record_declaration",
                }
            ),
            namespaces=frozenset({"namespace_declaration"}),
        ),
        "ruby": LanguageSpec(
            module="tree_sitter_ruby",
            functions=frozenset({"method", "singleton_method"}),
            classes=frozenset({"class", "singleton_class"}),
            namespaces=frozenset({"module"}),
        ),
        "php": LanguageSpec(
            module="tree_sitter_php",
            loader="language_php",
            functions=frozenset({"function_definition", "method_declaration"}),
            classes=frozenset({"class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"}),
            namespaces=frozenset({"namespace_definition"}),
        ),
        "kotlin": LanguageSpec(
            module="tree_sitter_kotlin",
            functions=frozenset({"function_declaration", "secondary_constructor"}),
            classes=frozenset({"class_declaration", "object_declaration", "companion_object"}),
            comments=frozenset({"line_comment", "block_comment"}),
        ),
        "swift": LanguageSpec(
            module="tree_sitter_swift",
            functions=frozenset(
                {
                    "function_declaration",
                    "init_declaration",
                    "deinit_declaration",
                    "protocol_function_declaration",
                    "subscript_declaration",
                }
            ),
            classes=frozenset({"class_declaration", "protocol_declaration"}),
            comments=frozenset({"comment", "multiline_comment"}),
        ),
        "scala": LanguageSpec(
            module="tree_sitter_scala",
            functions=frozenset({"function_definition", "function_declaration"}),
            classes=frozenset({"class_definition", "object_definition", "trait_definition", "enum_definition"}),
            comments=frozenset({"comment", "block_comment"}),
        ),
        "elixir": LanguageSpec(
            module="tree_sitter_elixir",
            is_leading=_elixir_leading,
            definer=_elixir_definer,
        ),
        "lua": LanguageSpec(
            module="tree_sitter_lua",
            functions=frozenset({"function_declaration"}),
        ),
        "shell": LanguageSpec(
            module="tree_sitter_bash",
            functions=frozenset({"function_definition"}),
        ),
        "haskell": LanguageSpec(
            module="tree_sitter_haskell",
            functions=frozenset({"function", "bind"}),
            classes=frozenset({"data_type", "newtype", "class", "instance", "type_family"}),
            comments=frozenset({"comment", "haddock"}),
            leading=frozenset({"signature"}),
            containers=frozenset({"declarations"}),
        ),
        "zig": LanguageSpec(
            module="tree_sitter_zig",
            functions=frozenset({"function_declaration", "test_declaration"}),
        ),
        "ocaml": LanguageSpec(
            module="tree_sitter_ocaml",
            loader="language_ocaml",
            functions=frozenset({"value_definition"}),
            classes=frozenset({"type_definition", "class_definition"}),
            namespaces=frozenset({"module_definition", "module_type_definition"}),
        ),
        "julia": LanguageSpec(
            module="tree_sitter_julia",
            functions=frozenset({"function_definition", "macro_definition"}),
            classes=frozenset({"struct_definition", "abstract_definition"}),
            namespaces=frozenset({"module_definition"}),
            comments=frozenset({"line_comment", "block_comment"}),
            leading=frozenset({"string_literal"}),  # a docstring precedes what it documents
        ),
    }
)


# What only C++ says at the start of a line: `template <`, `namespace x {`, `class X {`.
_CPP_MARKERS = re.compile(rb"^[ \t]*(?:template\s*<|namespace\s+\w+\s*\{|class\s+\w+[^;\n]*\{)", re.MULTILINE)


def spec_for(language: str | None, path: str, data: bytes | None = None) -> LanguageSpec | None:
    """The grammar spec for a file, or None when the chunker has no grammar for it.

    `.tsx` needs the TSX grammar even if a caller labels it plain "typescript". A `.h` header
    may be C or C++ (fmt, Boost and most C++ libraries use `.h`): given its `data`, one that
    uses templates, namespaces or classes is parsed as C++, which the C grammar would turn
    into errors (the language label stays "c": it comes from the name alone)."""
    lowered = path.lower()
    if language in ("typescript", "tsx") and lowered.endswith(".tsx"):
        return SPECS["tsx"]
    if language == "c" and lowered.endswith(".h") and data is not None and _CPP_MARKERS.search(data):
        return SPECS["cpp"]
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
    if spec.definer is not None:
        found = spec.definer(node)
        return Definition(node, node, found[0], found[1]) if found is not None else None
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
            (c for c in node.named_children if c.type in spec.wrappers or _kind_of(c, spec) or c.type in spec.bindings),
            None,
        )
        if inner is None:
            return None
        node, seen = inner, seen + 1
    return node


# Types that only declare when they have no body: `struct foo x;` or a bare `enum E` in C
# mentions a type; Rust's `mod x;` points at the file that defines the module.
_BODY_REQUIRED = frozenset(
    {
        "struct_specifier",
        "union_specifier",
        "enum_specifier",
        "class_specifier",
        "mod_item",
        "namespace_definition",
    }
)


def _kind_of(node: Node, spec: LanguageSpec) -> DefKind | None:
    t = node.type
    if t in _BODY_REQUIRED and body_of(node) is None:
        return None
    if t in spec.functions:
        return DefKind.FUNCTION
    if t in spec.classes:
        return DefKind.CLASS
    if t in spec.namespaces:
        return DefKind.NAMESPACE
    return None


def is_leading(node: Node, spec: LanguageSpec) -> bool:
    """Whether `node` (not a comment) leads into the definition after it: an attribute, an
    annotation, a type signature, an Elixir `@doc`."""
    return node.type in spec.leading or (spec.is_leading is not None and spec.is_leading(node))


_BODY_TYPES = frozenset(
    {
        "block",
        "class_body",
        "declaration_list",
        "field_declaration_list",
        "statement_block",
        "compound_statement",
        "interface_body",
        "enum_body",
        "enum_variant_list",
        "constructor_body",
        "template_body",
        "body_statement",
        "do_block",
        "protocol_body",
        "enum_class_body",
        "enum_member_declaration_list",
        "enum_declaration_list",
        "class_declarations",
        "instance_declarations",
        "structure",
        "signature",
    }
)


def body_of(node: Node) -> Node | None:
    """The node holding a definition's members or statements, if it has any."""
    body = node.child_by_field_name("body")
    if body is not None and body.child_count:
        return body
    for child in reversed(node.named_children):
        if child.type in _BODY_TYPES and child.child_count:
            return child
        if child.type in ("type_spec", "type_alias"):  # Go `type X struct {...}`
            return body_of(child.child_by_field_name("type") or child)
        if child.type in ("struct_type", "interface_type"):
            return body_of(child)
        if child.type in ("module_binding", "declarations"):  # OCaml `module M = struct...`, Haskell
            return body_of(child)
    return None


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
    if (
        kind is None
        and value.type in _FACTORY_VALUES
        and node.parent is not None
        and node.parent.type == "export_statement"
    ):
        kind = DefKind.FUNCTION  # `export const appRouter = router({...})`: made by a factory, defined all the same
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
_DECLARATOR_HOPS = frozenset(
    {
        "function_declarator",
        "pointer_declarator",
        "reference_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
    }
)


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
    if name is not None and name.type == "template_type":  # C++ `struct formatter<T>`: formatter
        name = name.child_by_field_name("name") or name
    if name is not None:
        return _qualified(_text(name))
    return _held_name(node, 0)


# Node types that are a definition's name, and nodes that hold one (looked through, at most
# `_NAME_DEPTH` deep) when a grammar has no `name` field.
_NAME_TYPES = frozenset(
    {
        "identifier",
        "constant",
        "type_identifier",
        "simple_identifier",
        "value_name",
        "module_name",
        "module_type_name",
        "type_constructor",
        "variable",
        "word",
        "scope_resolution",
        "dot_index_expression",
        "method_index_expression",
    }
)
_NAME_HOLDERS = frozenset(
    {
        "let_binding",
        "type_binding",
        "module_binding",
        "signature",
        "call_expression",
        "type_head",
        "class_binding",
        "user_type",
    }
)
_NAME_DEPTH = 3


def _held_name(node: Node, depth: int) -> str | None:
    for field in ("name", "pattern"):
        child = node.child_by_field_name(field)
        if child is not None and child.type in _NAME_TYPES:
            return _qualified(_text(child))
    for child in node.named_children:
        if child.type in _NAME_TYPES:
            return _qualified(_text(child))
        if child.type in _NAME_HOLDERS and depth < _NAME_DEPTH:
            return _held_name(child, depth + 1)
    return None


def _qualified(name: str) -> str:
    """`Sinatra::Base`, `M:method`, `a\\b` -> dotted, the chunker's way of qualifying."""
    return name.replace("::", ".").replace(":", ".").replace("\\", ".")


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
