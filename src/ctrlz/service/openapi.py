"""The OpenAPI 3.1 document of the API, built from the route declarations themselves."""

from __future__ import annotations

from typing import Any

from .routing import ENDPOINTS

ERROR_SCHEMA = {
    "type": "object",
    "required": ["type", "error", "message", "exit_code", "status"],
    "properties": {
        "type": {"const": "error"},
        "error": {"type": "string", "description": "The error's class (CtrlzError family)."},
        "message": {"type": "string", "description": "One line, as the CLI prints it."},
        "exit_code": {"type": "integer", "description": "The CLI's exit code for it."},
        "status": {"type": "integer"},
        "result": {"type": "object", "description": "What a restore that ended incomplete "
                                                    "did (its conflicts)."},
    },
}

#: routes the app adds itself, outside the declared ones
EXTRA_PATHS: dict[str, Any] = {
    "/v1/events": {"get": {
        "summary": "Live events (server-sent events): snapshot, snapshot-removed, "
                   "snapshot-updated, restore, toolcall, hooks, workspace, watcher.",
        "tags": ["events"],
        "parameters": [{"name": "workspace", "in": "query", "required": False,
                        "description": "Only this workspace's events.",
                        "schema": {"type": "string"}},
                       {"name": "Last-Event-ID", "in": "header", "required": False,
                        "description": "Resume after this event id.",
                        "schema": {"type": "string"}}],
        "responses": {"200": {"description": "An event stream.",
                              "content": {"text/event-stream": {}}}}}},
    "/v1/openapi.json": {"get": {"summary": "This document.", "tags": ["service"],
                                 "responses": {"200": {"description": "OpenAPI 3.1"}}}},
    "/v1/ui/login": {"post": {
        "summary": "A one-time dashboard login code and URL (socket only; `ctrlz ui`).",
        "tags": ["service"],
        "responses": {"200": {"description": "`{type: login, code, url, expires_in}`"}}}},
    "/v1/service/stop": {"post": {
        "summary": "Stop the service and its watchers (socket only).", "tags": ["service"],
        "responses": {"200": {"description": "`{type: service-stop, pid}`"}}}},
}


def document(version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for ep in ENDPOINTS:
        op: dict[str, Any] = {
            "operationId": ep.handler.__name__,
            "summary": ep.summary,
            "tags": list(ep.tags),
            "parameters": [{"name": p.name, "in": p.where, "required": p.required,
                            "description": p.description,
                            "schema": {"type": "array", "items": {"type": "string"}}
                            if p.repeat else {"type": p.type}}
                           for p in ep.params],
            "responses": {
                str(ep.status): {"description": ep.returns or "JSON",
                                 "content": {"application/json": {}}},
                "default": {"description": "An error.", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        }
        if ep.body is not None:
            op["requestBody"] = {"required": bool(ep.body.get("required")), "content": {
                "application/json": {"schema": ep.body}}}
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    for path, ops in EXTRA_PATHS.items():
        paths.setdefault(path, {}).update(ops)
    return {
        "openapi": "3.1.0",
        "info": {"title": "ctrlz service API", "version": version,
                 "description": "Snapshots, diffs and safe restores of every protected "
                                "workspace, in the shapes of the CLI's --json (docs/json.md). "
                                "On the Unix socket no credentials are needed (only its "
                                "owner can open it); through the gateway, a bearer token or "
                                "the dashboard's login cookie (with X-CSRF-Token)."},
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": {"Error": ERROR_SCHEMA},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "cookie": {"type": "apiKey", "in": "cookie",
                                           "name": "ctrlz_session"}},
        },
    }
