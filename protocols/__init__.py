"""Wire protocols: one adapter per serving protocol (Flask blueprints for ml v1 `:predict`,
Vertex AI, TF Serving REST, V2 REST and grps HTTP; gRPC servicers for V2 and grps, served by
grpcserve/). Each only decodes its requests and encodes its answers: every one reaches the model
through the data plane (`dataplane.predict`, or `dataplane.serve` and its `Served` where decoding
needs the model's signature), so adaptive batching, metrics, lastUseTime and request-response
logging are the same on every protocol."""
