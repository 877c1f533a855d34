"""Which gunicorn worker serves, and the gunicorn versions mlemu's own worker may run on.

deploy/worker.py subclasses gunicorn's gthread worker and overrides methods that are not
gunicorn's public interface (`TConn`, `enqueue_req`, `finish_request`, `murder_pending`,
`on_client_socket_readable`, the parser's unreader buffer, STOP_KEEPALIVE_LINGER), and
deploy/gunicorn.conf.py's stop hooks read the master's signal queue and gthread's method queue.
gthread changed in exactly these places within a year (gunicorn 23 to 27), and a change there
would not fail loudly: requests would hang or be read twice. So mlemu's worker starts only on
a gunicorn version it was tested with, and says so in one line otherwise; MLEMU_WORKER_CLASS=gthread
runs gunicorn's stock worker on any version (without the request deadlines and JSON errors).
"""

from __future__ import annotations

#: gunicorn versions deploy/worker.py was tested with (requirements.txt pins one of them).
TESTED_GUNICORN = ("27.0.1",)
#: MLEMU_WORKER_CLASS's values, as gunicorn's worker_class setting.
WORKER_CLASSES = {"mlemu": "deploy.worker.KeepAliveThreadWorker", "gthread": "gthread"}


class UntestedGunicorn(RuntimeError):
    """mlemu's worker was asked for on a gunicorn it was not tested with."""


def installed_gunicorn() -> str:
    import gunicorn

    return str(gunicorn.__version__)


def worker_class(name: str, version: str | None = None) -> str:
    """gunicorn's worker_class for MLEMU_WORKER_CLASS `name`; raises UntestedGunicorn (one line)
    when that is mlemu's worker and the installed gunicorn (`version`) is not a tested one."""
    version = installed_gunicorn() if version is None else version
    if name == "mlemu" and version not in TESTED_GUNICORN:
        raise UntestedGunicorn(
            f"mlemu: gunicorn {version} is installed, but mlemu's worker was tested with gunicorn "
            f"{', '.join(TESTED_GUNICORN)} only: install gunicorn=={TESTED_GUNICORN[-1]} "
            f"(requirements.txt), or set MLEMU_WORKER_CLASS=gthread to serve with gunicorn's "
            f"stock worker")
    return WORKER_CLASSES[name]
