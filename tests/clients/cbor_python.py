"""CBOR against the server with cbor2, a codec that has nothing to do with
the server's: create in CBOR, read back in CBOR and JSON and compare, watch
as a CBOR sequence, and a duplicate-key body refused. Usage:
cbor_python.py SERVER_URL"""

import base64
import io
import json
import sys
from collections.abc import Mapping
import urllib.error
import urllib.request

import cbor2

URL = sys.argv[1].rstrip("/")
NS = "/api/v1/namespaces/default"
CBOR = "application/cbor"


def call(method, path, body=None, ctype=None, accept=None):
    req = urllib.request.Request(URL + path, data=body, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def plain(v):
    """A decoded CBOR value as the JSON it stands for."""
    if isinstance(v, cbor2.CBORTag):
        assert v.tag == 22, f"unexpected tag {v.tag}"
        return base64.b64encode(v.value).decode()
    if isinstance(v, bytes):
        return v.decode("utf-8")
    # cbor2 gives frozendicts and tuples inside a map key's reach.
    if isinstance(v, Mapping):
        return {plain(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


cm = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "py-cbor"},
    "data": {"k": "v"},
    # []byte as kube's encoder writes it: raw bytes in tag 22.
    "binaryData": {"bin": cbor2.CBORTag(22, b"\x00\x01\xff")},
}
code, ctype, body = call(
    "POST", NS + "/configmaps", cbor2.dumps(cbor2.CBORTag(55799, cm)), CBOR, CBOR
)
assert code == 201, (code, body)
assert ctype == CBOR, ctype
assert body[:3] == b"\xd9\xd9\xf7", body[:3]
created = plain(cbor2.loads(body))
assert created["binaryData"]["bin"] == "AAH/", created

code, _, body = call("GET", NS + "/configmaps/py-cbor", accept=CBOR)
assert code == 200
raw = cbor2.loads(body)
# Strings are byte strings and []byte fields tag 22, as kube writes them.
assert raw[b"data"][b"k"] == b"v", raw
assert raw[b"binaryData"][b"bin"] == cbor2.CBORTag(22, b"\x00\x01\xff"), raw
code, _, body = call("GET", NS + "/configmaps/py-cbor", accept="application/json")
assert plain(raw) == json.loads(body), (plain(raw), body)

code, ctype, body = call(
    "GET",
    NS + "/configmaps?watch=1&timeoutSeconds=1&sendInitialEvents=true"
    "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
    accept=CBOR,
)
assert code == 200 and ctype == "application/cbor-seq", (code, ctype)
stream, events = io.BytesIO(body), []
while stream.tell() < len(body):
    events.append(plain(cbor2.CBORDecoder(stream).decode()))
added = [e for e in events if e["type"] == "ADDED"]
assert any(e["object"]["metadata"]["name"] == "py-cbor" for e in added), events
assert any(
    e["type"] == "BOOKMARK"
    and e["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end")
    == "true"
    for e in events
), events

# A map with a duplicate key (written by hand: cbor2 keeps dict keys unique).
dup = (
    b"\xd9\xd9\xf7\xa4"
    + cbor2.dumps("apiVersion") + cbor2.dumps("v1")
    + cbor2.dumps("kind") + cbor2.dumps("ConfigMap")
    + cbor2.dumps("metadata") + cbor2.dumps({"name": "py-dup"})
    + cbor2.dumps("kind") + cbor2.dumps("ConfigMap")
)
code, _, body = call("POST", NS + "/configmaps", dup, CBOR, CBOR)
assert code == 400, (code, body)
assert plain(cbor2.loads(body))["reason"] == "BadRequest"
code, _, _ = call("GET", NS + "/configmaps/py-dup")
assert code == 404, code
print("ok")
