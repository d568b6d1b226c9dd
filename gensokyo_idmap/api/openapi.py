"""The OpenAPI 3 document of the API listener, served at ``/openapi.json`` (pure data).

The test suite runs schemathesis against it: every answer the server gives must be one the
document names, with a body of the documented shape.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["openapi_document"]

_VUIN = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
_VUIN_INPUT = {"oneOf": [_VUIN, {"type": "string", "description": "decimal digits"}]}
_ERROR = {"$ref": "#/components/schemas/Error"}
_LEGACY_ERROR = {"$ref": "#/components/schemas/LegacyError"}
_READINESS: dict[str, Any] = {
    "type": "object", "required": ["ready", "missing"],
    "properties": {"ready": {"type": "boolean"},
                   "missing": {"type": "array", "items": {"type": "string"},
                               "description": "what the daemon lacks, one reason each "
                                              "(a setting, the token, the gateway, a "
                                              "store or server); no secret"}}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {400: "bad input (the message names the field and the value)",
             401: "no or wrong Bearer token (when api.token is set)",
             403: "peer not allowed (no api.token: loopback and api.getid_allow only), or "
                  "a write from another site (Origin, Sec-Fetch-Site: cross-site)",
             404: "not found", 409: "conflict with what is stored",
             415: "a write whose body is not sent as application/json",
             421: "a Host naming something but localhost or an api.allowed_hosts name",
             429: "10 wrong Bearer tokens from this client in the last minute (/v1, /getid "
                  "and the console's login count together): Retry-After says when to try "
                  "again; the token is not compared meanwhile",
             503: "a store cannot serve"}
    return {str(status): _json(_ERROR, words[status]) for status in statuses}


def _op(summary: str, ok: dict[str, Any], *errors: int, **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": {"200": _json(ok, "success"),
                                              **_errors(401, 403, 421, 429, 503,
                                                        *errors)},
            **extra}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties, "required": required}}}}


def _query(name: str, description: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": {"type": "string"}}


def _path(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}}


_APP_ID = _query("app_id", "AppID of one of the bots served: bare OpenIDs are of it "
                 "(default: the first bot's); one naming no bot served is a 400 naming them")
_IDENTITY_INPUT = {"type": "string", "description": "typed key (openid:QQ:<app>:<openid>, …), "
                   "rUIN-<PLATFORM>-<index>-<id> text, or a bare OpenID of the serving AppID"}

_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
    "LegacyError": {"type": "object", "required": ["error"],
                    "properties": {"error": {"type": "string"}}},
    "Resolution": {"type": "object", "required": ["vuin", "created", "added", "conflicts"],
                   "properties": {
                       "vuin": _VUIN, "created": {"type": "boolean"},
                       "added": {"type": "array", "items": {"type": "string"}},
                       "conflicts": {"type": "array", "items": {
                           "type": "object", "required": ["key", "vuin"],
                           "properties": {"key": {"type": "string"}, "vuin": _VUIN}}}}},
    "Lookup": {"type": "object", "required": ["key", "vuin"],
               "properties": {"key": {"type": "string", "nullable": True}, "vuin": _VUIN}},
    "Vuin": {"type": "object",
             "required": ["vuin", "requested", "identities", "last_seen", "aliases"],
             "properties": {
                 "vuin": _VUIN, "requested": _VUIN,
                 "identities": {"type": "array", "items": {"type": "string"}},
                 "last_seen": {"type": "object", "additionalProperties": {
                     "type": "object", "required": ["identity", "since"],
                     "properties": {"identity": {"type": "string"},
                                    "since": {"type": "number"}}}},
                 "aliases": {"type": "array", "items": _VUIN}}},
    "Pick": {"type": "object", "required": ["vuin", "identity", "ruin"],
             "properties": {"vuin": _VUIN, "identity": {"type": "string"},
                            "ruin": {"type": "string", "nullable": True}}},
    "Bind": {"type": "object",
             "required": ["outcome", "key", "vuin", "previous", "reason", "aliased"],
             "properties": {"outcome": {"enum": ["moved", "skipped"]},
                            "key": {"type": "string"}, "vuin": _VUIN,
                            "previous": {"type": "integer", "nullable": True},
                            "reason": {"type": "string"},
                            "aliased": {"type": "integer", "nullable": True}}},
    "Rebind": {"type": "object", "required": ["outcome", "old", "new", "moved", "reason"],
               "properties": {"outcome": {"enum": ["moved", "skipped"]}, "old": _VUIN,
                              "new": _VUIN,
                              "moved": {"type": "array", "items": {"type": "string"}},
                              "reason": {"type": "string"}}},
    "MsgRecord": {"type": "object",
                  "required": ["virtual_id", "real_id", "app_id", "chat_kind", "target",
                               "direction", "created_ms", "expires_ms"],
                  "properties": {"virtual_id": {"type": "integer"},
                                 "real_id": {"type": "string"}, "app_id": {"type": "string"},
                                 "chat_kind": {"type": "string"},
                                 "target": {"type": "string"},
                                 "direction": {"enum": ["in", "out"]},
                                 "created_ms": {"type": "integer"},
                                 "expires_ms": {"type": "integer"}}},
    "MsgId": {"type": "object", "required": ["real_id", "virtual_id", "app_id"],
              "properties": {"real_id": {"type": "string"}, "virtual_id": {"type": "integer"},
                             "app_id": {"type": "string",
                                        "description": "the bot whose message it is"}}},
    "Stats": {"type": "object", "required": ["openid_map", "msgid_map", "bots", "memory"],
              "properties": {
        "openid_map": {"type": "object", "required": [
            "identities", "vuins", "last_seen", "aliases", "config", "user_info"]},
        "msgid_map": {"type": "object", "required": ["entries", "counter"]},
        "bots": {"type": "object", "description": "per AppID: each bot served, then each "
                 "other AppID the graph has OpenIDs of", "additionalProperties": {
                     "type": "object", "required": ["served", "self_id", "openids"],
                     "properties": {"served": {"type": "boolean"},
                                    "self_id": {"type": "integer", "nullable": True},
                                    "openids": {"type": "integer"},
                                    "traffic": {"type": "object", "description":
                                                "a bot served: its events_in, events_out "
                                                "and actions since the daemon started"}}}},
        "memory": {"type": "object", "required": ["rss_anon_bytes", "rss_file_bytes",
                                                  "tables"],
                   "description": "this process's resident memory and its in-memory tables "
                   "keyed by chat, person or message (docs/operations.md, Memory)",
                   "properties": {
                       "rss_anon_bytes": {"type": "integer", "nullable": True},
                       "rss_file_bytes": {"type": "integer", "nullable": True},
                       "tables": {"type": "array", "items": {
                           "type": "object", "required": ["name", "entries", "bytes"],
                           "properties": {"name": {"type": "string"},
                                          "entries": {"type": "integer"},
                                          "bytes": {"type": "integer", "description":
                                                    "estimated from a sample of its "
                                                    "entries"}}}}}}}},
    "Getid": {"type": "object", "description": "by type: 1, 13, 16 {row}; 2, 17 {id}; "
              "3, 5, 15 {status}; 4 {value}; 6 {virtual, real}; 7 {virtual}; 8 {row, subRow}; "
              "9 {id, subid}; 10 {firstValue, secondValue}; 11 {firstRealValue, "
              "secondRealValue}; 12 {message}; 14 {keys}"},
}


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    vuin_path = _path("vuin", "a vUIN (decimal)")
    return {
        "openapi": "3.0.3",
        "info": {"title": "gensokyo-idmap API", "version": "1",
                 "description": "Identity bind & lookup, the Go daemon's /getid, health and "
                                "metrics. With api.token set, /v1 needs "
                                "`Authorization: Bearer <token>`."},
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/v1/resolve": {"post": _op(
                "Resolve identities seen together to one vUIN (allocated when all are new)",
                {"$ref": "#/components/schemas/Resolution"}, 400, 409, 415,
                parameters=[_APP_ID],
                requestBody=_body({"keys": {"type": "array", "items": _IDENTITY_INPUT,
                                            "minItems": 1, "maxItems": 64},
                                   "scene": {"type": "string"}}, ["keys"]))},
            "/v1/identity": {"get": _op(
                "The vUIN of a key (digits: the vUIN that number resolves to today)",
                {"$ref": "#/components/schemas/Lookup"}, 400, 404,
                parameters=[_query("key", "identity input or a vUIN", required=True),
                            _APP_ID])},
            "/v1/vuins/{vuin}": {"get": _op(
                "A vUIN: its identity set, last_seen per scene, aliases",
                {"$ref": "#/components/schemas/Vuin"}, 400, 404, parameters=[vuin_path])},
            "/v1/vuins/{vuin}/pick": {"get": _op(
                "The identity the reverse path would use for a QQ send in a scene",
                {"$ref": "#/components/schemas/Pick"}, 400, 404, parameters=[
                    vuin_path, _query("scene", "exact scene (QQ:<app>:group:<openid>)"),
                    _query("scene_prefix", "kind of chat (QQ:<app>:c2c:)"),
                    _query("app_id", "AppID whose OpenIDs are usable: one of the bots "
                                      "served (default: the first bot's)")])},
            "/v1/bind": {"post": _op(
                "Bind a key to a vUIN (added to its set; moved from the one it had)",
                {"$ref": "#/components/schemas/Bind"}, 400, 404, 409, 415,
                parameters=[_APP_ID],
                requestBody=_body({"key": _IDENTITY_INPUT, "vuin": _VUIN_INPUT},
                                  ["key", "vuin"]))},
            "/v1/rebind": {"post": _op(
                "Move every identity of one vUIN to another; the old one becomes an alias",
                {"$ref": "#/components/schemas/Rebind"}, 400, 404, 409, 415,
                requestBody=_body({"old": _VUIN_INPUT, "new": _VUIN_INPUT}, ["old", "new"]))},
            "/v1/msgids/{virtual_id}": {"get": _op(
                "A live virtual message id", {"$ref": "#/components/schemas/MsgRecord"},
                400, 404, parameters=[_path("virtual_id", "virtual message id (int32)")])},
            "/v1/msgids": {"get": _op(
                "The live virtual id of a real message id",
                {"$ref": "#/components/schemas/MsgId"}, 400, 404,
                parameters=[_query("real_id", "the platform's message id", required=True),
                            _query("app_id", "only a message of this bot (default: the "
                                             "newest record of it, whichever bot's)")])},
            "/v1/stats": {"get": _op("Counts per table of both stores, per AppID, and the "
                                     "memory of the process and of its in-memory tables",
                                     {"$ref": "#/components/schemas/Stats"}, 400,
                                     parameters=[_query("app_id", "this bot's figures alone "
                                                                  "(default: every AppID)")])},
            "/getid": {"get": {
                "summary": "The Go Gensokyo daemon's idmap API (lotus mode), types 1-17",
                "parameters": [_query("type", "1-17", required=True),
                               *(_query(name, "as the Go daemon reads it") for name in (
                                   "id", "subid", "subtype", "value", "oldRowValue",
                                   "newRowValue", "virtualValue", "oldVirtualValue1",
                                   "newVirtualValue1", "oldVirtualValue2",
                                   "newVirtualValue2"))],
                "responses": {
                    "200": _json({"$ref": "#/components/schemas/Getid"}, "success"),
                    **{str(s): _json(_LEGACY_ERROR, "error") for s in (400, 403, 404, 409,
                                                                       421, 429, 503)}}}},
            "/healthz": {"get": {"summary": "Stores writable, servers answering", "responses": {
                "204": {"description": "healthy"},
                "503": _json(_ERROR, "unhealthy: the reason")}}},
            "/readyz": {"get": {
                "summary": "Able to do its job: configured, token obtained, gateway "
                           "connected (qq.gateway), stores and servers working",
                "responses": {
                    "200": _json(_READINESS, "ready (missing is empty)"),
                    "503": _json(_READINESS, "not ready: missing names each reason")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {
                "description": "Prometheus text format",
                "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {
                "200": _json({"type": "object"}, "OpenAPI 3 document")}}},
        },
    }
