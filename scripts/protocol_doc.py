#!/usr/bin/env python3
"""Writes the tables of docs/protocol.md from docs/protocol.json, the protocol as data.

Every block between `<!-- generated: KIND [NAME] -->` and `<!-- end generated -->` in the document is what
docs/protocol.json gives for it:

    opcodes              the message table (section 8.1)
    fields MESSAGE       a message's JSON payload fields
    object NAME          a shared object's fields
    layout NAME          a binary structure's offsets
    limits, errors, features
    golden NAME          a golden-bytes example, as hex

  --check   exit 1, showing the difference, when a generated block is not what the JSON gives (CI runs it)
  --write   rewrite the blocks in place
"""

import argparse
import difflib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BLOCK = re.compile(r"(<!-- generated: ([a-z]+)(?: ([A-Za-z0-9_-]+))? -->\n)(.*?)(<!-- end generated -->)", re.S)
PRIMITIVES = {"string", "number", "bool", "object", "array", "any", "integer"}


def anchor(name):
    """The document's anchor of a shared object's heading."""
    return {
        "error": "91-broadcast-error",
        "status": "92-status-object",
        "streamCounters": "93-stream-counters",
        "manifest": "95-handler-manifest-object",
        "videoDescription": "96-video-description",
        "audioDescription": "97-audio-description",
        "capture": "98-capture",
        "encodedStream": "911-encoded-stream",
    }.get(name)


def type_name(name):
    if name in PRIMITIVES:
        return {"integer": "int"}.get(name, name)
    link = anchor(name)
    return f"[{name}](#{link})" if link else name


def field_type(field):
    kind = field["type"]
    if kind == "integer":
        text = field.get("format", "int")
    elif kind == "array":
        text = f"[{type_name(field.get('items', 'any'))}]"
    elif kind == "object" and "object" in field:
        text = type_name(field["object"])
    elif kind == "object" and "values" in field:
        text = f"object of string → {type_name(field['values'])}"
    else:
        text = type_name(kind)
    return text + ("?" if not field.get("required") else "")


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def meaning(field, since):
    text = field["text"]
    if field.get("enum") and "`" not in text.split(":")[0]:
        values = [f"`{v}`" for v in field["enum"]]
        text = ", ".join(values[:-1]) + " or " + values[-1] + (f": {text}" if text else "")
    if field.get("since") and field["since"] != since:
        text = f"({field['since']}) {text}"
    return cell(text)


def fields_table(fields, since=None):
    if not fields:
        return "The payload is `{}`: no fields.\n"
    rows = ["| Field | Type | Required | Meaning |", "|---|---|---|---|"]
    for f in fields:
        rows.append(
            f"| `{f['name']}` | {field_type(f)} | {'yes' if f.get('required') else 'no'} | {meaning(f, since)} |"
        )
    return "\n".join(rows) + "\n"


def opcodes_table(d):
    rows = ["| Opcode | Name | Roles | Dir | Payload | fds | Since |", "|---|---|---|---|---|---|---|"]
    for m in d["messages"]:
        roles = "any" if len(m["roles"]) == 3 else ", ".join(m["roles"])
        direction = "→D" if m["direction"] == "to-daemon" else ("D→ event" if m.get("event") else "D→")
        payload = m["payload"]
        if payload["kind"] == "binary":
            layout = d["layouts"][payload["layout"]]
            kind = f"binary, {layout['size']}" + (" + data" if "trailer" in layout else "") + " bytes"
        elif payload["kind"] == "ignored":
            kind = "ignored"
        elif "object" in payload:
            kind = f"JSON: {type_name(payload['object'])}"
        else:
            kind = "JSON" if payload.get("fields") else "`{}`"
        fds = m.get("descriptors", 0)
        rows.append(
            f"| `{m['opcode']}` | {m['name']} | {roles} | {direction} | {kind} | {f'**{fds}** (memfd)' if fds else 0} "
            f"| {m.get('since', '1.0')} |"
        )
    return "\n".join(rows) + "\n"


def layout_table(layout):
    rows = ["| Offset | Type | Field | Meaning |", "|---|---|---|---|"]
    for f in layout["fields"]:
        kind = f["type"] if f["type"].startswith(("u", "i")) else f"{f['size']} bytes"
        rows.append(f"| {f['offset']} | {kind} | `{f['name']}` | {cell(f['text'])} |")
    if "trailer" in layout:
        rows.append(f"| {layout['size']} | … | data | {cell(layout['trailer'])} |")
    return "\n".join(rows) + "\n"


def limits_table(d):
    rows = ["| Limit | Value |", "|---|---|"]
    rows += [f"| {cell(limit['limit'])} | {cell(limit['rule'])} |" for limit in d["limits"]]
    return "\n".join(rows) + "\n"


def errors_table(d):
    rows = ["| Code | Where | Meaning |", "|---|---|---|"]
    for e in d["errors"]:
        since = f"({e['since']}) " if e.get("since") else ""
        rows.append(f"| `{e['code']}` | {cell(', '.join(e['where']))} | {since}{cell(e['text'])} |")
    return "\n".join(rows) + "\n"


def features_table(d):
    rows = ["| Feature | Since | Offered | What it brings |", "|---|---|---|---|"]
    for f in d["features"]:
        rows.append(
            f"| `{f['name']}` | {f['since'] or '—'} | {'yes' if f['offered'] else 'not yet'} | {cell(f['text'])} |"
        )
    return "\n".join(rows) + "\n"


def golden_block(example):
    data = bytes.fromhex(example["hex"])
    lines = [" ".join(f"{b:02x}" for b in data[i : i + 16]) for i in range(0, len(data), 16)]
    return "```hex\n" + "\n".join(lines) + "\n```\n"


def render(d, kind, name):
    messages = {m["name"]: m for m in d["messages"]}
    if kind == "opcodes":
        return opcodes_table(d)
    if kind == "fields":
        message = messages[name]
        return fields_table(message["payload"].get("fields"), message.get("since"))
    if kind == "object":
        return fields_table(d["objects"][name]["fields"], d["objects"][name].get("since"))
    if kind == "layout":
        return layout_table(d["layouts"][name])
    if kind == "golden":
        return golden_block(next(g for g in d["golden"] if g["name"] == name))
    return {"limits": limits_table, "errors": errors_table, "features": features_table}[kind](d)


def generate(document, description):
    """The document with every generated block made anew, and the (kind, name) of each block."""
    blocks = []

    def replace(match):
        kind, name = match.group(2), match.group(3)
        blocks.append((kind, name))
        return match.group(1) + "\n" + render(description, kind, name) + "\n" + match.group(5)

    return BLOCK.sub(replace, document), blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--check", action="store_true", help="fail when the document's generated tables are not the JSON's"
    )
    mode.add_argument("--write", action="store_true", help="rewrite the generated tables")
    parser.add_argument("--document", default=os.path.join(ROOT, "docs", "protocol.md"))
    parser.add_argument("--description", default=os.path.join(ROOT, "docs", "protocol.json"))
    args = parser.parse_args()
    with open(args.description, encoding="utf-8") as f:
        description = json.load(f)
    with open(args.document, encoding="utf-8") as f:
        document = f.read()
    try:
        generated, blocks = generate(document, description)
    except (KeyError, StopIteration) as e:
        print(f"protocol_doc: a generated block names what {args.description} does not have: {e}", file=sys.stderr)
        return 1
    # Every message with fields, every object, layout and example appears in the document.
    wanted = {("opcodes", None), ("limits", None), ("errors", None), ("features", None)}
    wanted |= {("fields", m["name"]) for m in description["messages"] if m["payload"].get("fields")}
    wanted |= {("object", name) for name in description["objects"]} | {
        ("layout", name) for name in description["layouts"]
    }
    wanted |= {("golden", g["name"]) for g in description["golden"]}
    missing = sorted(f"{kind} {name or ''}".strip() for kind, name in wanted - set(blocks))
    if missing:
        print(f"protocol_doc: {args.document} has no generated block for: {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.write:
        if generated != document:
            with open(args.document, "w", encoding="utf-8") as f:
                f.write(generated)
        return 0
    if generated != document:
        diff = difflib.unified_diff(
            document.splitlines(),
            generated.splitlines(),
            "docs/protocol.md",
            "from docs/protocol.json",
            lineterm="",
            n=1,
        )
        print("\n".join(list(diff)[:80]), file=sys.stderr)
        print(
            "protocol_doc: the document's generated tables differ from docs/protocol.json: "
            "run scripts/protocol_doc.py --write",
            file=sys.stderr,
        )
        return 1
    print(f"protocol_doc: {len(blocks)} generated blocks match docs/protocol.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
