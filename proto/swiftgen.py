#!/usr/bin/env python3
"""Generate the Swift glue over protobuf-c for every .proto under proto/.

The glue converts between plain Swift value types and the C structs that protoc-c generates, and
calls protobuf-c's pack/unpack. Nothing per message is written by hand: this script reads the
contracts (a strict subset of proto3, below) and writes one Swift file per .proto.

Supported: syntax proto3, package, import, top-level `message` and `enum`, scalar fields, `repeated`,
fields typed by a message or enum of any imported package, `reserved`, `service` with `rpc`, and the
method annotations `// frienso:public`, `// frienso:internal(member, …)` and `// frienso:read` on the
lines above an rpc (`read`: the rpc changes nothing a caller sees, so a client, the gateway or a
service may send it again when its first try met a peer that went silent or an instance that
died; it goes with either of the others).
Anything else (nested types, oneof, map, optional, field options, streams) stops the script with an
error naming the file and line, so the contracts and the glue can never silently disagree.

Usage: swiftgen.py PROTO_ROOT OUT_DIR [HANDLERS_FILE]

HANDLERS_FILE (Wire's generated code) gets, per service, a `Handler` protocol with one method
per rpc and `MethodRouter.register(all:)`, so a service that misses an rpc does not compile.
"""
import os
import re
import sys

SCALARS = {
    # proto type: (Swift type, default literal, C-to-Swift, Swift-to-C)
    "double": ("Double", "0", "{}", "{}"),
    "float": ("Float", "0", "{}", "{}"),
    "int32": ("Int32", "0", "{}", "{}"),
    "sint32": ("Int32", "0", "{}", "{}"),
    "sfixed32": ("Int32", "0", "{}", "{}"),
    "int64": ("Int64", "0", "{}", "{}"),
    "sint64": ("Int64", "0", "{}", "{}"),
    "sfixed64": ("Int64", "0", "{}", "{}"),
    "uint32": ("UInt32", "0", "{}", "{}"),
    "fixed32": ("UInt32", "0", "{}", "{}"),
    "uint64": ("UInt64", "0", "{}", "{}"),
    "fixed64": ("UInt64", "0", "{}", "{}"),
    "bool": ("Bool", "false", "({} != 0)", "({} ? 1 : 0)"),
}

SWIFT_KEYWORDS = {
    "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import", "init",
    "inout", "internal", "let", "open", "operator", "private", "protocol", "public", "rethrows",
    "static", "struct", "subscript", "typealias", "var", "break", "case", "continue", "default",
    "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat", "return", "switch",
    "where", "while", "as", "catch", "false", "is", "nil", "super", "self", "Self", "throw", "throws",
    "true", "try", "Type", "some", "any",
}


class ProtoError(Exception):
    pass


def camel_to_lower(name):
    """protoc-c's CamelToLower: '_' before an upper-case letter that follows a non-upper one."""
    out = name[:1].lower()
    for i in range(1, len(name)):
        if name[i].isupper() and not name[i - 1].isupper():
            out += "_"
        out += name[i].lower()
    return out


def lower_camel(snake):
    parts = snake.split("_")
    name = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    return f"`{name}`" if name in SWIFT_KEYWORDS else name


def upper_camel(snake):
    return "".join(p[:1].upper() + p[1:].lower() for p in snake.split("_") if p)


class File:
    def __init__(self, path, rel):
        self.path, self.rel = path, rel
        self.package = None
        self.imports = []
        self.messages = []  # (name, [fields])
        self.enums = []     # (name, [(value_name, number)])
        self.services = []  # (name, [(rpc, req, resp, access)])
        self.reads = set()  # (service name, rpc) marked frienso:read

    @property
    def namespace(self):
        # frienso.accounts.v1 -> AccountsV1
        parts = self.package.split(".")
        return "".join(p[:1].upper() + p[1:] for p in parts[1:])

    @property
    def service_short_name(self):
        return self.package.split(".")[1]

    def c_prefix(self):
        return "".join(p[:1].upper() + p[1:] + "__" for p in self.package.split("."))

    def c_func_prefix(self):
        return "".join(p.lower() + "__" for p in self.package.split("."))


def tokenize(text, path):
    """Yields (line, token) pairs; comments are dropped except frienso annotations."""
    tokens = []
    for lineno, line in enumerate(text.splitlines(), 1):
        comment = line.find("//")
        if comment >= 0:
            ann = re.match(r"\s*//\s*frienso:(\w+)(?:\(([a-z, ]*)\))?\s*$", line[comment:])
            if ann and line[:comment].strip() == "":
                callers = ",".join(c.strip() for c in (ann.group(2) or "").split(",") if c.strip())
                tokens.append((lineno, "@" + ann.group(1) + (":" + callers if callers else "")))
            line = line[:comment]
        if "/*" in line:
            raise ProtoError(f"{path}:{lineno}: block comments are not supported")
        for tok in re.findall(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|[{}();=\[\],<>]', line):
            tokens.append((lineno, tok))
    return tokens


def parse(path, rel):
    f = File(path, rel)
    with open(path, encoding="utf-8") as fh:
        toks = tokenize(fh.read(), rel)
    i = 0

    def fail(msg):
        line = toks[i][0] if i < len(toks) else "EOF"
        raise ProtoError(f"{rel}:{line}: {msg}")

    def take(expected=None):
        nonlocal i
        if i >= len(toks):
            fail("unexpected end of file")
        tok = toks[i][1]
        if expected is not None and tok != expected:
            fail(f"expected '{expected}', found '{tok}'")
        i += 1
        return tok

    while i < len(toks):
        tok = take()
        if tok == "syntax":
            take("=")
            if take() != '"proto3"':
                fail("only proto3 is supported")
            take(";")
        elif tok == "package":
            f.package = take()
            take(";")
        elif tok == "import":
            f.imports.append(take().strip('"'))
            take(";")
        elif tok == "option":
            while take() != ";":
                pass
        elif tok == "enum":
            name = take()
            take("{")
            values = []
            while toks[i][1] != "}":
                vname = take()
                if vname in ("option", "reserved"):
                    fail(f"'{vname}' inside an enum is not supported")
                take("=")
                values.append((vname, int(take())))
                take(";")
            take("}")
            if not values or values[0][1] != 0:
                fail(f"enum {name} must start with a zero value")
            f.enums.append((name, values))
        elif tok == "message":
            name = take()
            take("{")
            fields = []
            while toks[i][1] != "}":
                word = take()
                if word == "reserved":
                    while take() != ";":
                        pass
                    continue
                if word in ("message", "enum", "oneof", "map", "optional", "extensions", "option"):
                    fail(f"'{word}' is not supported by proto/swiftgen.py (see its docstring)")
                repeated = word == "repeated"
                ftype = take() if repeated else word
                fname = take()
                take("=")
                number = int(take())
                if toks[i][1] == "[":
                    fail("field options are not supported")
                take(";")
                fields.append({"type": ftype, "name": fname, "number": number, "repeated": repeated})
            take("}")
            f.messages.append((name, fields))
        elif tok == "service":
            name = take()
            take("{")
            rpcs = []
            access = "authenticated"
            callers = []
            read = False
            while toks[i][1] != "}":
                word = take()
                if word.startswith("@"):
                    kind, _, listed = word[1:].partition(":")
                    if kind == "read":
                        if listed or read:
                            fail("frienso:read stands once above an rpc and takes no arguments")
                        read = True
                        continue
                    if kind not in ("public", "internal"):
                        fail(f"unknown annotation frienso:{kind}")
                    callers = listed.split(",") if listed else []
                    if kind == "internal" and not callers:
                        fail("frienso:internal names the members that may call it, e.g. frienso:internal(gateway)")
                    if kind == "public" and callers:
                        fail("frienso:public takes no callers: clients reach it through the gateway")
                    access = kind
                    continue
                if word != "rpc":
                    fail(f"expected 'rpc', found '{word}'")
                rpc = take()
                take("(")
                req = take()
                if req == "stream":
                    fail("streaming rpcs are not supported")
                take(")")
                take("returns")
                take("(")
                resp = take()
                take(")")
                take(";")
                rpcs.append((rpc, req, resp, access, callers))
                if read:
                    f.reads.add((name, rpc))
                access = "authenticated"
                callers = []
                read = False
            take("}")
            f.services.append((name, rpcs))
        elif tok.startswith("@"):
            fail("a frienso annotation must stand directly above an rpc")
        else:
            fail(f"unexpected '{tok}'")
    if not f.package:
        raise ProtoError(f"{rel}: no package")
    return f


class Registry:
    """Resolves type names across files: name -> (kind, File, short name)."""

    def __init__(self, files):
        self.types = {}
        for f in files:
            for name, _ in f.messages:
                self.types[f"{f.package}.{name}"] = ("message", f, name)
            for name, _ in f.enums:
                self.types[f"{f.package}.{name}"] = ("enum", f, name)

    def resolve(self, f, tname):
        if tname.startswith("."):
            tname = tname[1:]
        for candidate in (f"{f.package}.{tname}", tname):
            if candidate in self.types:
                return self.types[candidate]
        raise ProtoError(f"{f.rel}: unknown type '{tname}'")


def swift_type_name(f, name):
    return f"{f.namespace}.{name}"


def c_type_name(f, name):
    return f.c_prefix() + name


def c_func(f, name, suffix):
    return f.c_func_prefix() + camel_to_lower(name) + "__" + suffix


def gen_enum(f, name, values, out):
    ns_prefix = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper() + "_"
    cases = []
    for vname, number in values:
        short = vname[len(ns_prefix):] if vname.startswith(ns_prefix) else vname
        cases.append((lower_camel(short.lower()), number, vname))
    out.append(f"extension {f.namespace} {{")
    out.append(f"    /// `{f.package}.{name}`: an open enum, as in proto3; unknown numbers survive a round trip.")
    out.append(f"    public enum {name}: ProtoEnum {{")
    for case, _, vname in cases:
        out.append(f"        case {case} // {vname}")
    out.append("        case unrecognized(Int32)")
    out.append("")
    out.append(f"        public static let allKnownCases: [{name}] = [{', '.join('.' + c for c, _, _ in cases)}]")
    out.append("")
    out.append("        public init(rawValue: Int32) {")
    out.append("            switch rawValue {")
    for case, number, _ in cases:
        out.append(f"            case {number}: self = .{case}")
    out.append("            default: self = .unrecognized(rawValue)")
    out.append("            }")
    out.append("        }")
    out.append("")
    out.append("        public var rawValue: Int32 {")
    out.append("            switch self {")
    for case, number, _ in cases:
        out.append(f"            case .{case}: return {number}")
    out.append("            case .unrecognized(let value): return value")
    out.append("            }")
    out.append("        }")
    out.append("")
    out.append(f'        public var protoName: String {{')
    out.append("            switch self {")
    for case, _, vname in cases:
        out.append(f'            case .{case}: return "{vname}"')
    out.append('            case .unrecognized(let value): return "\\(value)"')
    out.append("            }")
    out.append("        }")
    out.append("    }")
    out.append("}")
    out.append("")


def field_info(reg, f, field):
    """Returns a dict describing how to declare, read and write the field."""
    t = field["type"]
    cname = field["name"]
    info = {"c": cname, "swift": lower_camel(cname), "repeated": field["repeated"], "proto": t}
    if t in SCALARS:
        swift, default, from_c, to_c = SCALARS[t]
        info.update(kind="scalar", swift_type=swift, default=default, from_c=from_c, to_c=to_c)
    elif t == "string":
        info.update(kind="string", swift_type="String", default='""')
    elif t == "bytes":
        info.update(kind="bytes", swift_type="[UInt8]", default="[]")
    else:
        kind, tf, tname = reg.resolve(f, t)
        info.update(kind=kind, swift_type=swift_type_name(tf, tname), file=tf, tname=tname)
        if kind == "enum":
            info.update(default=".init(rawValue: 0)", c_type=c_type_name(tf, tname))
        else:
            info.update(default="nil", c_type=c_type_name(tf, tname), init=c_func(tf, tname, "init"))
    return info


def decl_type(info):
    if info["repeated"]:
        return f"[{info['swift_type']}]"
    if info["kind"] == "message":
        return f"{info['swift_type']}?"
    return info["swift_type"]


def stored_type(info):
    if info["kind"] == "message" and not info["repeated"]:
        return f"Optional<{info['swift_type']}>"
    return decl_type(info)


def decl_default(info):
    return "[]" if info["repeated"] else info["default"]


def gen_to_c(info):
    """Lines that copy self.<field> into the C struct `c` (inout), allocating from `arena`."""
    s, c, kind = f"self.{info['swift']}", info["c"], info["kind"]
    if not info["repeated"]:
        if kind == "scalar":
            return [f"c.{c} = " + info["to_c"].format(s)]
        if kind == "string":
            return [f"if !{s}.isEmpty {{ c.{c} = arena.string({s}) }}"]
        if kind == "bytes":
            return [f"c.{c} = arena.binary({s})"]
        if kind == "enum":
            return [f"c.{c} = {info['c_type']}(rawValue: .init(truncatingIfNeeded: {s}.rawValue))"]
        return [f"if let value = {s} {{",
                f"    c.{c} = arena.message(of: {info['c_type']}.self) {{ {info['init']}($0); value.copy(into: &$0.pointee, arena: arena) }}",
                "}"]
    lines = [f"c.n_{c} = {s}.count"]
    if kind == "scalar":
        conv = info["to_c"].format("$0")
        lines.append(f"c.{c} = arena.array({s}.map {{ {conv} }})" if conv != "$0" else f"c.{c} = arena.array({s})")
    elif kind == "string":
        lines.append(f"c.{c} = arena.strings({s})")
    elif kind == "bytes":
        lines.append(f"c.{c} = arena.array({s}.map {{ arena.binary($0) }})")
    elif kind == "enum":
        lines.append(f"c.{c} = arena.array({s}.map {{ {info['c_type']}(rawValue: .init(truncatingIfNeeded: $0.rawValue)) }})")
    else:
        lines.append(f"c.{c} = arena.array({s}.map {{ value in arena.message(of: {info['c_type']}.self) {{ {info['init']}($0); value.copy(into: &$0.pointee, arena: arena) }} }})")
    return lines


def gen_from_c(info):
    """An expression that reads the field from the C struct `c`."""
    c, kind = f"c.{info['c']}", info["kind"]
    if not info["repeated"]:
        if kind == "scalar":
            return info["from_c"].format(c)
        if kind == "string":
            return f"ProtoRuntime.string({c})"
        if kind == "bytes":
            return f"ProtoRuntime.bytes({c})"
        if kind == "enum":
            return f"{info['swift_type']}(rawValue: Int32(truncatingIfNeeded: {c}.rawValue))"
        return f"{c}.map {{ {info['swift_type']}(c: $0.pointee) }}"
    each = {
        "scalar": info.get("from_c", "{}").format("$0"),
        "string": "ProtoRuntime.string($0)",
        "bytes": "ProtoRuntime.bytes($0)",
        "enum": f"{info['swift_type']}(rawValue: Int32(truncatingIfNeeded: $0.rawValue))",
        "message": f"{info['swift_type']}(c: $0!.pointee)",
    }[kind]
    return f"ProtoRuntime.array({c}, count: c.n_{info['c']}) {{ {each} }}"


def gen_sample(info, index, seed="seed"):
    """An expression building a deterministic non-default value from `seed` (tests only)."""
    kind, n = info["kind"], index + 1
    one = {
        "scalar": {
            "Bool": f"{seed} % 2 == 0",
            "Double": f"Double({seed}) * 1.5 - {n}.25",
            "Float": f"Float({seed}) * 0.5 + {n}",
            "Int32": f"ProtoSample.int32({seed}, {n})",
            "Int64": f"ProtoSample.int64({seed}, {n})",
            "UInt32": f"ProtoSample.uint32({seed}, {n})",
            "UInt64": f"ProtoSample.uint64({seed}, {n})",
        }.get(info["swift_type"]),
        "string": f'ProtoSample.string({seed}, "{info["c"]}")',
        "bytes": f"ProtoSample.bytes({seed}, {n})",
        "enum": f"ProtoSample.enumValue({seed}, {info['swift_type']}.self)",
        "message": f"(depth < 3 ? {info['swift_type']}.sample(seed: seed &+ {n}, depth: depth + 1) : {info['swift_type']}())",
    }[kind]
    if info["repeated"]:
        if kind == "message":
            return f"depth < 3 ? (0..<Int(seed % 3)).map {{ i in {info['swift_type']}.sample(seed: seed &+ UInt64(i) &+ {n}, depth: depth + 1) }} : []"
        each = gen_sample(dict(info, repeated=False), index, seed="(seed &+ UInt64(i))")
        return f"(0..<Int((seed &+ {n}) % 4)).map {{ i in {each} }}"
    if kind == "message":
        return f"seed % 4 == 3 ? nil : {one}"
    return one


def json_forms(info, expr):
    """One value of the field: (the `JSONValue` expression, the statement writing the same
    text with `JSONText`), side by side so that the two stay one rendering."""
    kind = info["kind"]
    if kind == "scalar":
        t = info["swift_type"]
        if t == "Bool":
            return f".bool({expr})", f"JSONText.bool({expr}, into: &out)"
        if t in ("Int64", "UInt64"):
            return f".string(String({expr}))", f"JSONText.quoted({expr}, into: &out)"
        return f".number(Double({expr}))", f"JSONText.number(Double({expr}), into: &out)"
    if kind == "string":
        return f".string({expr})", f"JSONValue.quote({expr}, into: &out)"
    if kind == "bytes":
        return f".bytes({expr})", f"JSONText.bytes({expr}, into: &out)"
    if kind == "enum":
        return f".string({expr}.protoName)", f"JSONValue.quote({expr}.protoName, into: &out)"
    return f"{expr}.jsonValue", f"{expr}.writeJSON(into: &out)"


def gen_json(info):
    """An expression giving the field's canonical proto3 JSON value."""
    s = f"self.{info['swift']}"
    if info["repeated"]:
        return f".array({s}.map {{ {json_forms(info, '$0')[0]} }})"
    if info["kind"] == "message":
        return f"{s}.map {{ $0.jsonValue }} ?? .null"
    return json_forms(info, s)[0]


def gen_json_write(info, indent):
    """Statements writing the field's value as `gen_json`'s expression renders it."""
    s = f"self.{info['swift']}"
    pad = " " * indent
    if info["repeated"]:
        return [f"{pad}JSONText.array({s}, into: &out) {{ item, out in {json_forms(info, 'item')[1]} }}"]
    if info["kind"] == "message":
        return [f"{pad}JSONText.message({s}, into: &out)"]
    return [pad + json_forms(info, s)[1]]


def gen_from_json(info, value="value"):
    """An expression reading the field from JSON `value` (proto3's JSON mapping)."""
    def one(v):
        kind = info["kind"]
        if kind == "scalar":
            return {"Bool": "ProtoJSON.bool", "Double": "ProtoJSON.double", "Float": "ProtoJSON.float",
                    "Int32": "ProtoJSON.int32", "Int64": "ProtoJSON.int64", "UInt32": "ProtoJSON.uint32",
                    "UInt64": "ProtoJSON.uint64"}[info["swift_type"]] + f"({v})"
        if kind == "string":
            return f"ProtoJSON.string({v})"
        if kind == "bytes":
            return f"ProtoJSON.bytes({v})"
        if kind == "enum":
            return f"ProtoJSON.enumeration({v}, {info['swift_type']}.self)"
        return f"ProtoJSON.message({v}, {info['swift_type']}.self)"
    if info["repeated"]:
        each = one("$0")
        if info["kind"] == "message":
            each = f"{info['swift_type']}(json: $0)"
        return f"ProtoJSON.repeated({value}) {{ (item: JSONValue) throws(JSONMappingError) in try {each.replace('$0', 'item')} }}"
    return one(value)


def gen_message(reg, f, name, fields, out):
    infos = [field_info(reg, f, fd) for fd in fields]
    ctype = c_type_name(f, name)
    out.append(f"extension {f.namespace} {{")
    out.append(f"    /// `{f.package}.{name}`")
    out.append(f"    public struct {name}: ProtoMessage {{")
    # No default values on the stored properties (and `Optional<T>`, not `T?`, which would
    # default to nil): with them, Swift 6.3 -O built every initialiser as the defaults, then
    # a copy of the whole value and a destroy of the first (two outlined copies of an envelope a
    # request, by callgrind). Each initialiser assigns every field instead.
    for info in infos:
        out.append(f"        public var {info['swift']}: {stored_type(info)}")
    out.append("")
    if infos:
        out.append("        public init() {")
        for i in infos:
            out.append(f"        self.{i['swift']} = {decl_default(i)}")
        out.append("        }")
    else:
        out.append("        public init() {}")
    if infos:
        out.append("")
        params = ", ".join(f"{i['swift'].strip('`')}: {decl_type(i)} = {decl_default(i)}" for i in infos)
        out.append(f"        public init({params}) {{")
        for i in infos:
            out.append(f"        self.{i['swift']} = {i['swift']}")
        out.append("        }")
    out.append("    }")
    out.append("}")
    out.append("")
    out.append(f"extension {f.namespace}.{name} {{")
    out.append(f'    public static let protoName = "{f.package}.{name}"')
    out.append("")
    # Top-level bytes fields are lent to protobuf-c for the pack (no copy into the arena): a
    # photo chunk or an envelope's payload is copied once, into the output, not twice.
    lent = [i for i in infos if i["kind"] == "bytes" and not i["repeated"]]

    def gen_pack(call, indent):
        # The arena's first chunk is on the stack (at most 1 KiB, no runtime check): the header
        # strings of an envelope fit, so a typical encode calls `malloc` for the output only.
        lines = [f"{indent}return withUnsafeTemporaryAllocation(byteCount: ProtoArena.stackBytes, alignment: ProtoArena.alignment) {{ stack in"]
        indent += "    "
        lines += [f"{indent}let arena = ProtoArena(stack: stack)",
                 f"{indent}var c = {ctype}()",
                 f"{indent}{c_func(f, name, 'init')}(&c)",
                 f"{indent}copy(into: &c, arena: arena{', lendingBytes: true' if lent else ''})"]
        depth = indent
        for k, info in enumerate(lent):
            lines.append(f"{depth}return self.{info['swift']}.withUnsafeBufferPointer {{ lent{k} in")
            depth += "    "
            lines.append(f"{depth}c.{info['c']} = ProtoRuntime.lent(lent{k})")
        lines.append(f"{depth}return {call}")
        for k in range(len(lent)):
            depth = depth[:-4]
            lines.append(f"{depth}}}")
        lines.append(f"{indent[:-4]}}}")
        return lines

    out.append("    public func serializedBytes() -> [UInt8] {")
    out.extend(gen_pack(f"ProtoRuntime.pack(&c, size: {c_func(f, name, 'get_packed_size')}, pack: {c_func(f, name, 'pack')})", "        "))
    out.append("    }")
    out.append("")
    out.append("    public func serialize(into allocate: (Int) -> UnsafeMutableRawPointer?) -> Int? {")
    out.extend(gen_pack(f"ProtoRuntime.pack(&c, size: {c_func(f, name, 'get_packed_size')}, pack: {c_func(f, name, 'pack')}, into: allocate)", "        "))
    out.append("    }")
    out.append("")
    out.append("    public init(serializedBytes bytes: [UInt8]) throws(ProtoDecodingError) {")
    out.append(f"        self = try ProtoRuntime.unpack(bytes, \"{f.package}.{name}\", unpack: {c_func(f, name, 'unpack')}) {{ Self(c: $0.pointee) }}")
    out.append("    }")
    out.append("")
    out.append("    public init(serializedBuffer buffer: UnsafeRawBufferPointer) throws(ProtoDecodingError) {")
    out.append(f"        self = try ProtoRuntime.unpack(buffer, \"{f.package}.{name}\", unpack: {c_func(f, name, 'unpack')}) {{ Self(c: $0.pointee) }}")
    out.append("    }")
    out.append("")
    arena_used = any(i["kind"] in ("string", "bytes", "message") or i["repeated"] for i in infos)
    arena_param = "arena" if arena_used else "arena _"
    c_param = "into c" if infos else "into _"
    lend_param = ", lendingBytes: Bool = false" if lent else ""
    out.append(f"    func copy({c_param}: inout {ctype}, {arena_param}: ProtoArena{lend_param}) {{")
    for info in infos:
        lines = gen_to_c(info)
        if info in lent:  # the caller lends them for the pack instead
            lines = [f"if !lendingBytes {{ {lines[0]} }}"] + lines[1:]
        for line in lines:
            out.append("        " + line)
    out.append("    }")
    out.append("")
    c_param = "c" if infos else "c _"
    out.append(f"    init({c_param}: {ctype}) {{")
    # Each field assigned straight from the C struct: plain stores into the new value, since the
    # stored properties have no defaults (above); the memberwise initialiser would add a call.
    if infos:
        for i in infos:
            out.append(f"        self.{i['swift']} = {gen_from_c(i)}")
    else:
        out.append("        self.init()")
    out.append("    }")
    out.append("")
    out.append("    /// The canonical proto3 JSON form (lowerCamel names, 64-bit integers as strings).")
    out.append("    public var jsonValue: JSONValue {")
    if len(infos) > 10:
        # One statement per field: a long literal of mixed closures takes the type checker
        # longer than the build allows (Swift 6.3 gives up at 13 fields).
        out.append("        var fields: [(String, JSONValue)] = []")
        out.append(f"        fields.reserveCapacity({len(infos)})")
        for i in infos:
            out.append(f'        fields.append(("{lower_camel(i["c"]).strip("`")}", {gen_json(i)}))')
        out.append("        return .object(fields)")
    else:
        pairs = ", ".join(f'("{lower_camel(i["c"]).strip("`")}", {gen_json(i)})' for i in infos)
        out.append(f"        .object([{pairs}])" if infos else "        .object([])")
    out.append("    }")
    out.append("")
    out.append("    /// `jsonValue` as one line of UTF-8, written without the tree (the HTTP edge's replies).")
    out.append("    public func writeJSON(into out: inout [UInt8]) {")
    if infos:
        for n, i in enumerate(infos):
            key = lower_camel(i["c"]).strip("`")
            out.append(f'        out.append(contentsOf: #"{"{" if n == 0 else ","}"{key}":"#.utf8)')
            out.extend(gen_json_write(i, 8))
        out.append('        out.append(UInt8(ascii: "}"))')
    else:
        out.append('        out.append(contentsOf: "{}".utf8)')
    out.append("    }")
    out.append("")
    # Checked by every host on every request: no array is built (a literal or `map` would
    # allocate per request); repeated fields fold in place.
    out.append("    /// Reads proto3's JSON mapping: lowerCamel or proto field names, the rules of `ProtoJSON`.")
    out.append("    public init(json: JSONValue) throws(JSONMappingError) {")
    out.append("        self.init()")
    if infos:
        out.append(f'        for (key, value) in try ProtoJSON.object(json, Self.protoName) {{')
        out.append("            switch key {")
        for i in infos:
            names = sorted({lower_camel(i["c"]).strip("`"), i["c"]})
            labels = ", ".join(f'"{n}"' for n in names)
            out.append(f'            case {labels}: self.{i["swift"]} = try ProtoJSON.field(key) {{ () throws(JSONMappingError) in try {gen_from_json(i)} }}')
        out.append("            default: throw ProtoJSON.unknown(key, Self.protoName)")
        out.append("            }")
        out.append("        }")
    else:
        out.append("        for (key, _) in try ProtoJSON.object(json, Self.protoName) { throw ProtoJSON.unknown(key, Self.protoName) }")
    out.append("    }")
    out.append("")
    out.append("    /// The largest unsigned 64-bit value in the message, nested messages included (0 when none).")
    out.append("    public var largestUInt64: UInt64 {")
    terms = []
    for i in infos:
        s_ = f"self.{i['swift']}"
        if i["kind"] == "scalar" and i["swift_type"] == "UInt64":
            terms.append(f"({s_}.max() ?? 0)" if i["repeated"] else s_)
        elif i["kind"] == "message":
            terms.append(f"{s_}.reduce(0) {{ Swift.max($0, $1.largestUInt64) }}" if i["repeated"] else f"({s_}?.largestUInt64 ?? 0)")
    if not terms:
        out.append("        0")
    elif len(terms) == 1:
        out.append(f"        {terms[0]}")
    else:
        out.append(f"        var m = {terms[0]}")
        for t in terms[1:]:
            out.append(f"        m = Swift.max(m, {t})")
        out.append("        return m")
    out.append("    }")
    out.append("")
    out.append("    /// A deterministic value with every field set, for codec tests.")
    out.append("    @_spi(Testing) public static func sample(seed: UInt64, depth: Int = 0) -> Self {")
    if infos:
        args = ", ".join(f"{i['swift'].strip('`')}: {gen_sample(i, k)}" for k, i in enumerate(infos))
        out.append(f"        Self({args})")
    else:
        out.append("        Self()")
    out.append("    }")
    out.append("}")
    out.append("")


def gen_service(f, name, rpcs, out):
    out.append(f"extension {f.namespace} {{")
    out.append(f"    /// The methods of `{f.package}.{name}`, with the access the contract declares.")
    out.append(f"    public enum {name} {{")
    for rpc, req, resp, access, callers in rpcs:
        listed = ", ".join(f'"{c}"' for c in callers)
        extra = f", callers: [{listed}]" if callers else ""
        if (name, rpc) in f.reads:
            extra += ", readOnly: true"
        out.append(f"        public static let {lower_camel(camel_to_lower(rpc))} = RPCMethod<{req}, {resp}>("
                   f'service: "{f.service_short_name}", name: "{rpc}", access: .{access}{extra})')
    names = ", ".join(lower_camel(camel_to_lower(r[0])) + ".erased" for r in rpcs)
    codecs = ", ".join(lower_camel(camel_to_lower(r[0])) + ".jsonCodec" for r in rpcs)
    out.append("")
    out.append(f"        public static let all: [AnyRPCMethod] = [{names}]")
    out.append("")
    out.append("        /// Each rpc's request and response in proto3's JSON mapping.")
    out.append(f"        public static let jsonCodecs: [MethodJSONCodec] = [{codecs}]")
    out.append("    }")
    out.append("}")
    out.append("")


def gen_handlers(files, path):
    """The rpc table as Swift types: a Handler protocol per service and MethodRouter.register(all:)."""
    out = ["// Generated by proto/generate from proto/. Do not edit.", "",
           "public import FriensoProto", ""]
    for f in files:
        for name, rpcs in f.services:
            ns = f.namespace
            out.append(f"extension {ns}.{name} {{")
            out.append(f"    /// Answers every rpc of `{f.package}.{name}`: one method per rpc, so a contract rpc")
            out.append("    /// without a handler does not compile. Register it with `MethodRouter.register(all:)`.")
            out.append("    public protocol Handler: Sendable {")
            for rpc, req, resp, access, callers in rpcs:
                method = lower_camel(camel_to_lower(rpc))
                who = f"internal: {', '.join(callers)}" if access == "internal" else access
                if (name, rpc) in f.reads:
                    who += ", read"
                out.append(f"        /// `{f.service_short_name}.{rpc}` ({who}).")
                out.append(f"        func {method}(_ request: {ns}.{req}, _ context: RequestContext) async throws -> {ns}.{resp}")
            out.append("    }")
            out.append("}")
            out.append("")
            out.append(f"extension FriensoService where Self: {ns}.{name}.Handler {{")
            out.append("    /// Every rpc of the contract, each to its handler.")
            out.append("    public func router() -> MethodRouter {")
            out.append("        var router = MethodRouter()")
            out.append("        router.register(all: self)")
            out.append("        return router")
            out.append("    }")
            out.append("}")
            out.append("")
            out.append("extension MethodRouter {")
            out.append(f"    /// Registers every rpc of `{f.package}.{name}` with `handler`.")
            out.append(f"    public mutating func register(all handler: some {ns}.{name}.Handler) {{")
            for rpc, req, resp, access, callers in rpcs:
                method = lower_camel(camel_to_lower(rpc))
                out.append(f"        register({ns}.{name}.{method}) {{ try await handler.{method}($0, $1) }}")
            out.append("    }")
            out.append("}")
            out.append("")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out).rstrip() + "\n")


def json_schema(reg, f, field):
    """The JSON Schema of one field in proto3's canonical JSON mapping (what the edge writes)."""
    info = field_info(reg, f, field)
    kind = info["kind"]
    if kind == "scalar":
        t = info["swift_type"]
        one = {
            "Bool": {"type": "boolean"},
            "Double": {"type": "number"},
            "Float": {"type": "number"},
            "Int32": {"type": "integer", "format": "int32", "minimum": -2**31, "maximum": 2**31 - 1},
            "UInt32": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1},
            "Int64": {"type": "string", "format": "int64", "pattern": "^-?[0-9]{1,19}$"},
            "UInt64": {"type": "string", "format": "uint64", "pattern": "^[0-9]{1,20}$"},
        }[t]
    elif kind == "string":
        one = {"type": "string"}
    elif kind == "bytes":
        one = {"type": "string", "contentEncoding": "base64"}
    elif kind == "enum":
        _, tf, tname = reg.resolve(f, field["type"])
        values = dict(tf.enums)[tname]
        one = {"type": "string", "enum": [v for v, _ in values]}
    else:
        _, tf, tname = reg.resolve(f, field["type"])
        one = {"$ref": f"#/components/schemas/{tf.package}.{tname}"}
    return {"type": "array", "items": one} if field["repeated"] else one


def gen_openapi(files, reg, path):
    """The OpenAPI 3.1 document of the HTTP edge, as a Swift string (`OpenAPIDocument.json`)."""
    import json
    schemas = {}
    for f in files:
        for name, fields in f.messages:
            props = {lower_camel(fd["name"]).strip("`"): json_schema(reg, f, fd) for fd in fields}
            schemas[f"{f.package}.{name}"] = {"type": "object", "properties": props, "additionalProperties": False}
    statuses = [("INVALID_ARGUMENT", 400), ("UNAUTHENTICATED", 401), ("PERMISSION_DENIED", 403), ("NOT_FOUND", 404),
                ("ALREADY_EXISTS", 409), ("FAILED_PRECONDITION", 412), ("RESOURCE_EXHAUSTED", 429),
                ("INTERNAL", 500), ("UNAVAILABLE", 503), ("DEADLINE_EXCEEDED", 504)]
    schemas["Error"] = {
        "type": "object", "required": ["code", "name", "message"], "additionalProperties": False,
        "properties": {
            "code": {"type": "integer", "description": "The StatusCode number (common/v1/envelope.proto)."},
            "name": {"type": "string", "enum": [n for n, _ in statuses]},
            "message": {"type": "string"},
        },
    }
    def error_response(text):
        return {"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    paths = {}
    idem = {"name": "Idempotency-Key", "in": "header", "required": False,
            "description": "Replays of a request with the same key get the first reply (mutations).",
            "schema": {"type": "string", "maxLength": 128}}
    for f in files:
        for sname, rpcs in f.services:
            for rpc, req, resp, access, callers in rpcs:
                if access == "internal":
                    continue
                _, rf, rname = reg.resolve(f, req)
                _, pf, pname = reg.resolve(f, resp)
                op = {
                    "operationId": f"{f.service_short_name}.{rpc}",
                    "summary": f"{f.service_short_name}.{rpc}",
                    "tags": [f.service_short_name],
                    "parameters": [idem],
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": f"#/components/schemas/{rf.package}.{rname}"}}}},
                    "responses": {
                        "200": {"description": "OK", "content": {"application/json": {
                            "schema": {"$ref": f"#/components/schemas/{pf.package}.{pname}"}}}},
                        "default": error_response("An error: the StatusCode, its name and a message"),
                    },
                }
                op["security"] = [{"bearer": []}] if access == "authenticated" else [{}, {"bearer": []}]
                if (sname, rpc) in f.reads:
                    # A read: safe to send again without an Idempotency-Key (a 503 is worth a retry).
                    op["x-frienso-read"] = True
                paths[f"/v1/{f.service_short_name}/{rpc}"] = {"post": op}
    for f in files:
        if f.services:
            short = f.service_short_name
            paths[f"/v1/{short}/Ping"] = {"post": {
                "operationId": f"{short}.Ping", "summary": f"{short}.Ping: is the service up", "tags": [short],
                "security": [{}, {"bearer": []}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/frienso.common.v1.PingRequest"}}}},
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/frienso.common.v1.PingResponse"}}}},
                              "default": error_response("An error: the StatusCode, its name and a message")}}}
    paths["/v1/openapi.json"] = {"get": {"operationId": "openapi", "summary": "This document", "security": [{}],
                                         "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    paths["/v1/health"] = {"get": {"operationId": "health", "summary": "Liveness of the edge", "security": [{}],
                                   "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "Frienso", "version": "1",
                 "description": "Every client rpc of proto/ at POST /v1/<service>/<Rpc>, in protobuf's canonical JSON mapping. "
                                "Errors map each StatusCode to an HTTP status: " +
                                ", ".join(f"{n} {c}" for n, c in statuses) + "."},
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items())),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "The session token accounts.Login returns."}}},
    }
    text = json.dumps(doc, indent=1, sort_keys=False)
    if '"""#' in text:
        raise ProtoError("the OpenAPI document cannot be embedded in a raw string")
    out = ["// Generated by proto/generate from proto/. Do not edit.", "",
           "/// The HTTP edge's OpenAPI 3.1 document, from the contracts (served at `/v1/openapi.json`).",
           "public enum OpenAPIDocument {",
           '    public static let json = #"""', text, '"""#', "}"]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")


def generate(root, out_dir, handlers_path=None):
    files = []
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            if n.endswith(".proto"):
                path = os.path.join(dirpath, n)
                files.append(parse(path, os.path.relpath(path, root)))
    files.sort(key=lambda f: f.rel)
    reg = Registry(files)
    os.makedirs(out_dir, exist_ok=True)
    namespaces = sorted({f.namespace for f in files})
    all_messages, all_methods, all_codecs = [], [], []
    for f in files:
        out = [f"// Generated by proto/generate from {f.rel}. Do not edit.", "",
               "internal import FriensoProtoC", ""]
        for name, values in f.enums:
            gen_enum(f, name, values, out)
        for name, fields in f.messages:
            gen_message(reg, f, name, fields, out)
            all_messages.append(f"{f.namespace}.{name}.self")
        for name, rpcs in f.services:
            gen_service(f, name, rpcs, out)
            all_methods.append(f"{f.namespace}.{name}.all")
            all_codecs.append(f"{f.namespace}.{name}.jsonCodecs")
        base = os.path.splitext(os.path.basename(f.rel))[0]
        with open(os.path.join(out_dir, f"{base}.pb.swift"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(out).rstrip() + "\n")
    index = ["// Generated by proto/generate. Do not edit.", ""]
    for ns in namespaces:
        index.append(f"public enum {ns} {{}}")
    index += ["", "public enum ProtoIndex {",
              "    /// Every message type in proto/, for codec tests and tooling.",
              "    public static let messageTypes: [any ProtoMessage.Type] = [",
              *[f"        {m}," for m in all_messages],
              "    ]", "",
              "    /// Every rpc in proto/, with its declared access.",
              f"    public static let methods: [AnyRPCMethod] = [{', '.join(all_methods)}].flatMap {{ $0 }}",
              "",
              "    /// Every rpc's JSON mapping, by wire name (`geo.Nearby`).",
              f"    public static let jsonCodecs: [String: MethodJSONCodec] = Dictionary(uniqueKeysWithValues: [{', '.join(all_codecs)}].flatMap {{ $0 }}.map {{ ($0.method.fullName, $0) }})",
              "}"]
    with open(os.path.join(out_dir, "ProtoIndex.pb.swift"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(index) + "\n")
    gen_openapi(files, reg, os.path.join(out_dir, "OpenAPIDocument.pb.swift"))
    if handlers_path:
        gen_handlers(files, handlers_path)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    try:
        generate(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    except ProtoError as e:
        sys.exit(f"swiftgen: {e}")
