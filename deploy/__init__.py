"""Deployment: the gunicorn worker and settings, the container image and Cloud Run service."""
