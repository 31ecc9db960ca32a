"""A shipped locale's compiled catalog (.mo) that is missing is said at start-up, by the
web app, the worker and `authsvc check`, never found by the first email in that locale."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from authsvc import locales
from authsvc.cli import main
from authsvc.web.app import create_app


@pytest.fixture
def no_catalogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A translations folder holding the German pages catalog only (a build that skipped
    `pybabel compile`)."""
    real = locales.translations_dir()
    folder = tmp_path / "translations"
    (folder / "de" / "LC_MESSAGES").mkdir(parents=True)
    (folder / "de" / "LC_MESSAGES" / "pages.mo").write_bytes(
        (real / "de" / "LC_MESSAGES" / "pages.mo").read_bytes())
    monkeypatch.setattr(locales, "translations_dir", lambda: folder)
    locales.translations.cache_clear()
    yield folder
    locales.translations.cache_clear()


def test_every_shipped_catalog_loads():
    locales.load_catalogs()  # raises if one is missing


def test_a_missing_catalog_names_each_one_and_the_fix(no_catalogs):
    with pytest.raises(locales.CatalogMissing) as refused:
        locales.load_catalogs()
    message = str(refused.value)
    assert "de/LC_MESSAGES/emails.mo" in message and "pt_BR/LC_MESSAGES/pages.mo" in message
    assert "de/LC_MESSAGES/pages.mo" not in message
    assert "make install" in message and "pybabel compile" in message


def test_the_web_app_does_not_start_without_its_catalogs(no_catalogs, settings, pool):
    with pytest.raises(locales.CatalogMissing, match="make install"):
        create_app(settings, pool=pool)


def test_the_worker_does_not_start_without_its_catalogs(no_catalogs, env):
    result = CliRunner().invoke(main, ["worker", "--once"], env=env)
    assert result.exit_code != 0
    assert "make install" in result.output and "emails.mo" in result.output, result.output
