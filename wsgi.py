"""Entry point for `gunicorn wsgi:app` (from a checkout; `authsvc serve` needs none)."""

from dotenv import load_dotenv

from authsvc.web.app import create_served_app

load_dotenv(".env", override=False)
app = create_served_app()
