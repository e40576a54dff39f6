"""Writes one marked section of docs/benchmarks.md, leaving the other sections as they are."""
import os


def write_section(path, begin, end, section):
    """Replaces the text from `begin` to `end` in `path` with `section` (appended when absent)."""
    doc = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + section.rstrip("\n") + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + section
    with open(path, "w") as out:
        out.write(doc)
