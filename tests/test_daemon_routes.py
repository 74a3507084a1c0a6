"""The daemon's router: fixed and templated paths, HEAD, the methods a path allows."""

import pytest

from edge_translator.daemon.routes import Router


def _router() -> Router:
    router = Router()
    router.add_module({("GET", "/v1/documents/{id}"): "status", ("DELETE", "/v1/documents/{id}"): "delete",
                       ("GET", "/v1/documents/{id}/result"): "result", ("POST", "/v1/documents"): "create",
                       ("GET", "/health"): "health"}, "native")
    router.add("POST", "/v2/document/{document_id}", "deepl-status", "deepl")
    return router


@pytest.mark.parametrize("method,path,handler,args", [
    ("POST", "/v1/documents", "create", {}),
    ("GET", "/v1/documents/abc123", "status", {"id": "abc123"}),
    ("DELETE", "/v1/documents/abc123", "delete", {"id": "abc123"}),
    ("GET", "/v1/documents/a.b-c/result", "result", {"id": "a.b-c"}),
    ("HEAD", "/v1/documents/x/result", "result", {"id": "x"}),
    ("HEAD", "/health", "health", {}),
    ("POST", "/v2/document/D1", "deepl-status", {"document_id": "D1"}),
])
def test_a_path_finds_its_route_and_arguments(method, path, handler, args):
    route, found = _router().match(method, path)
    assert route is not None and route.handler == handler and found == args


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/documents/a/b"),          # a segment never spans a slash
    ("GET", "/v1/documents/"),              # nor is it empty
    ("PUT", "/v1/documents/abc"),
    ("GET", "/v1/documentsX"),
    ("POST", "/v2/document/D1/extra"),
])
def test_other_paths_find_none(method, path):
    assert _router().match(method, path) == (None, {})


def test_the_methods_a_path_allows():
    router = _router()
    assert router.allowed("/v1/documents/abc") == ["DELETE", "GET", "HEAD"]
    assert router.allowed("/v1/documents") == ["POST"]
    assert router.allowed("/nowhere") == []


def test_metrics_name_a_route_by_its_template():
    route, _ = _router().match("GET", "/v1/documents/secret-id")
    assert route.template == "/v1/documents/{id}"


@pytest.mark.parametrize("template", ["/health", "/v1/documents/{id}"])
def test_a_route_added_twice_is_refused(template):
    router = _router()
    with pytest.raises(ValueError, match="routed twice"):
        router.add("GET", template, "again", "native")
