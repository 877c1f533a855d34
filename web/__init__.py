"""The web layer shared by the HTTP adapters (api/ and protocols/), so neither reaches into the
other: the request's verified caller, bounded body reading and JSON decoding, plain JSON responses
(web/http.py); Google API conventions, i.e. standard query parameters, partial responses and the
Google error object (web/google.py); and the one error-handler registration every protocol
blueprint uses with its own renderer (web/handlers.py)."""
