"""The model registry: resource names, ml v1 resources, the durable store, bootstrap, and the
per-process cache of loaded predictors (deployments)."""
