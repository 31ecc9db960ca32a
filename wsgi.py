"""Entry point for `gunicorn wsgi:app`."""

from authsvc.app import create_app
from authsvc.logs import configure_logging

configure_logging()
app = create_app()
