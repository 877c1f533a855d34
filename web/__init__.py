"""The web layer shared by the HTTP adapters (api/ and protocols/): callers, bodies, JSON and
Google API responses."""
