"""/metrics behind AUTHSVC_METRICS_TOKEN: send counters move only for known
addresses, so a public scrape would tell an attacker which accounts exist."""

from __future__ import annotations

import pytest

from authsvc.config import ConfigError, load_settings

TOKEN = "scrape-token-0123456789"


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "AUTHSVC_METRICS_TOKEN": TOKEN}


def test_metrics_need_the_bearer_token(client):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong-token-xxxxxxx"}
                      ).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    answer = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and b"authsvc_email_sends_total" in answer.data


def test_production_refuses_to_start_without_a_metrics_token(env):
    production = {
        **{k: v for k, v in env.items() if k != "AUTHSVC_METRICS_TOKEN"},
        "AUTHSVC_ENV": "production",
        "AUTHSVC_BASE_URL": "https://auth.example.com",
        "AUTHSVC_SMTP_URL": "smtps://mail.example.com",
    }
    with pytest.raises(ConfigError) as refused:
        load_settings(production)
    assert "AUTHSVC_METRICS_TOKEN: required in production" in refused.value.problems
    assert load_settings({**production, "AUTHSVC_METRICS_TOKEN": TOKEN}).metrics_token == TOKEN


def test_a_short_metrics_token_is_refused(env):
    with pytest.raises(ConfigError):
        load_settings({**env, "AUTHSVC_METRICS_TOKEN": "short"})
