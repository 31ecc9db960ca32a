"""Entry point for `gunicorn wsgi:app` (from a checkout; `authsvc serve` needs none)."""

from dotenv import load_dotenv

from authsvc.app import create_app
from authsvc.logs import configure_logging

load_dotenv(".env", override=False)
configure_logging()
app = create_app()
