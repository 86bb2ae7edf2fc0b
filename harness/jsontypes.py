"""The JSON values the harness reads back, by name, so that code reading a capture says what it holds.

- `JSONValue`: what `json.loads` (or orjson) gives for any JSON text: None,
  a bool, an int, a float, a str, a list of values or an object of values.
  Code that reads a file written by anyone checks what it got
  (`isinstance`) before it trusts it; the type says that it must.
- `JSONObject`: a JSON object as read, `dict[str, JSONValue]` (a manifest,
  a status.json, one JSONL line).

What the harness writes needs no name of its own: the writers
(`capture.files.write_json_atomic`, `append_jsonl`) take any object
`json.dumps` encodes, and the documents are typed where they are built
(dataclasses and TypedDicts).
"""

from __future__ import annotations

from typing import TypeAlias, Union

JSONScalar: TypeAlias = Union[None, bool, int, float, str]
JSONValue: TypeAlias = Union[JSONScalar, list["JSONValue"], dict[str, "JSONValue"]]
JSONObject: TypeAlias = dict[str, JSONValue]
