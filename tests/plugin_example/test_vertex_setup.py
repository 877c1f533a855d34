"""pytest-mlemu's `vertex_init`: the Vertex AI SDK is pointed at the session's server."""

from __future__ import annotations


def test_vertex_init_points_the_sdk_at_mlemu(vertex_init, mlemu_server):
    from google.cloud.aiplatform import initializer

    config = initializer.global_config
    assert config.api_endpoint == mlemu_server.url.split("://", 1)[1]
    assert config.project == mlemu_server.project
    assert config.location == "us-central1"
    assert vertex_init.Endpoint is not None  # the module itself, ready to use
