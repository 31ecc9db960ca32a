"""`make test-pgbouncer`: the suite with every test database behind PgBouncer in transaction mode.

Starts a throwaway PostgreSQL (pgserver's binaries, its own folder and port)
and Debian's PgBouncer in front of it in transaction mode, then runs pytest
with AUTHSVC_TEST_DATABASE_URL on the pooler and AUTHSVC_TEST_DIRECT_DATABASE_URL
on the server (tests/pg.py: databases are created there, and tests get it as
AUTHSVC_DIRECT_DATABASE_URL for LISTEN). Arguments after the module name go
to pytest. Exits with pytest's status; both servers are stopped either way.

    python -m tests.pooled_run -n 2 --dist loadfile -q --basetemp=/tmp/x
"""

from __future__ import annotations

import os
import subprocess
import sys

from chaos.servers import PgBouncer, Postgres


def main(pytest_args: list[str]) -> int:
    server = Postgres("pooled-suite", max_connections=400)
    try:
        bouncer = PgBouncer("127.0.0.1", server.port)
        try:
            env = dict(os.environ,
                       AUTHSVC_TEST_DATABASE_URL=bouncer.url(),
                       AUTHSVC_TEST_DIRECT_DATABASE_URL=server.url())
            print(f"pooled suite: PgBouncer (transaction mode) on :{bouncer.port}"
                  f" in front of PostgreSQL on :{server.port}", file=sys.stderr, flush=True)
            return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
        finally:
            bouncer.close()
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
